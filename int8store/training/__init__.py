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
  saved model: :func:`~.parameters.load_parameters`, its class names:
  :func:`~.parameters.saved_class_names`) and its loop's numbers
  (:mod:`.early_stopping`);
* a tutorial's run (:mod:`.runner`: :class:`~.runner.Run`, what int8store
  adds to the classic loop, a call each), its command-line options
  (:mod:`.options`: :func:`~.options.add_arguments`, parsed by a
  :class:`OneLineParser`) and its command
  (:mod:`.command`: :func:`~.command.run_command`).

Here too, as the namespace of a run's tools: JAX mode's set-up
(:func:`set_up_run`), augmentation (:class:`Augmentation`), the epoch lines
(:class:`EpochLines`), stop requests (:func:`stop_requests`,
:func:`stop_requested`) and the tutorials' own checkpoints
(:func:`save_checkpoint`, :func:`checkpoint_writes`).

May import: everything below it on the spine (:mod:`int8store.errors`,
``runtime``, ``codes``, ``order``, ``augment``, ``backend``, ``store``, ``sources``, ``plan``,
``memory``, ``dataset``, ``streaming``, ``loading``).
"""

from ..runtime.exports import lazy_exports

_LAZY = {
    "Run": ".runner",
    "add_arguments": ".options",
    "OneLineParser": "..runtime.arguments",
    "run_options": ".options",
    "check_options": ".options",
    "check_saved_model": ".options",
    "run_command": ".command",
    "predict_command": ".command",
    "run_reporting_errors": ".command",
    "print_summary": ".command",
    "steps_function": ".steps",
    "TrainingSteps": ".steps",
    "minibatch_calls": ".steps",
    "default_steps": ".steps",
    "ACCELERATOR_STEPS": ".steps",
    "scoring_function": ".scoring",
    "evaluate_in_chunks": ".scoring",
    "SplitScore": ".scoring",
    "RunCheckpoint": ".run",
    "RunState": ".run",
    "open_run_checkpoint": ".run",
    "run_identity": ".run",
    "load_parameters": ".parameters",
    "open_saved_model": ".parameters",
    "saved_class_names": ".parameters",
    "EARLY_STOPPING": ".early_stopping",
    "set_up_run": "..backend.jax.run_setup",
    "Augmentation": "..augment.spec",
    "EpochLines": "..runtime.progress",
    "stop_requests": "..runtime.interrupts",
    "stop_requested": "..runtime.interrupts",
    "save_checkpoint": "..store.checkpoint",
    "checkpoint_writes": "..store.checkpoint",
    "class_count": "..codes.labels",
    "class_names": "..sources.naming",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
