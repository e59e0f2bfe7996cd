"""The training loop's own tools, and the run the bundled tutorials make
with them.

* many minibatch updates in one call of the compiled step (:mod:`.steps`:
  :func:`~.steps.steps_function`, the epoch's minibatches grouped into such
  calls, :func:`~.steps.minibatch_calls`);
* a split scored every example once (:mod:`.scoring`: in JAX mode in one
  call, :func:`~.scoring.scoring_function`);
* a checkpoint that holds a run, to resume it exactly (:mod:`.run`:
  :class:`~.run.RunCheckpoint`), checked against the run before anything is
  set: its parameters against the model's (:mod:`.parameters`, also for a
  saved model: :func:`~.parameters.load_parameters`) and its loop's numbers
  (:mod:`.early_stopping`);
* a tutorial's run (:mod:`.runner`: :class:`~.runner.Run`, what int8store
  adds to the classic loop, a call each), its command-line options
  (:mod:`.options`: :func:`~.options.add_arguments`) and its command
  (:mod:`.command`: :func:`~.command.run_command`).

May import: everything below it on the spine (:mod:`int8store.errors`,
``runtime``, ``codes``, ``order``, ``augment``, ``backend``, ``store``, ``sources``, ``plan``,
``memory``, ``dataset``, ``streaming``, ``loading``).
"""

from .command import print_summary, run_command, run_reporting_errors
from .options import add_arguments, run_options
from .runner import Run

__all__ = ["Run", "add_arguments", "run_options", "run_command", "run_reporting_errors",
           "print_summary"]
