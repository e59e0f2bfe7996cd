"""A tutorial's command line, run: :func:`run_command` (``--predict``:
:func:`predict_command`).

What the classic scripts' ``if __name__ == '__main__'`` did, and what a run
from a shell also needs: options that cannot go together refused first
(:func:`~int8store.training.options.check_options`); the run's processes
joined and JAX mode set up before anything uses JAX; an int8store error
reported in one line (exit status 2); Ctrl-C or SIGTERM stopping the
training after its minibatch, so that the best model so far is reported as
such and its checkpoint kept
(exit status 130 or 143; a second one stops at once, and so does one
before the training loop starts: the loading, a download); a checkpoint that
cannot be written (a full disk) said in one line while the training goes
on; the result's summary; and output read by what has gone (``| head``)
ending the run quietly, as a command-line tool ends (exit status 141).
"""

import functools
import math
import sys

from ..errors import ArgumentError, Int8StoreError
from ..runtime.files import end_with_stdout_closed, stdout_closed
from ..runtime.interrupts import stop_requests
from ..store.checkpoint import checkpoint_writes
from .options import check_options, check_saved_model, files_said, run_options

__all__ = ["run_command", "predict_command", "print_summary"]


def _ends_quietly_on_a_closed_pipe(command):
    """``command``, ended quietly (exit status 141, as by SIGPIPE) when
    what reads its standard output has gone
    (:func:`~int8store.runtime.files.end_with_stdout_closed`, as the
    ``int8store`` command ends). A broken pipe of anything else is raised
    as it is."""

    @functools.wraps(command)
    def ended(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except BrokenPipeError:
            if not stdout_closed():
                raise
            return end_with_stdout_closed()

    return ended


@_ends_quietly_on_a_closed_pipe
def run_command(train, args, program=None, **kwargs):
    """``train(**kwargs, **run options)`` as a command (see the module
    docstring); ``args``: the parsed options
    (:func:`~int8store.training.options.add_arguments`); ``program``: the
    name ``train`` gives :meth:`~int8store.training.runner.Run.resume`, so
    that another program's checkpoint is refused before anything is loaded.
    Returns the exit status."""
    try:
        check_options(args, program)
    except Int8StoreError as error:
        return _said(error)
    for line in files_said(args):
        print(line)
    if args.coordinator:  # several processes: joined before any JAX use
        from ..backend.jax.sharding import start_processes

        # (JAX waits for every process, minutes, deaf to Ctrl-C: a typo in
        # HOST:PORT, or process 0 not started, would look like a hang)
        print(f"... process {args.process_id} of {args.num_processes}: waiting for the others at "
              f"the coordinator {args.coordinator} (process 0's; SIGTERM stops the wait)",
              flush=True)
        try:
            start_processes(args.coordinator, args.num_processes, args.process_id)
        except Int8StoreError as error:
            return _said(error)
        args.mode, args.devices = "jax", args.devices or "all"
    result, status = run_reporting_errors(_set_up_and, train, args, **kwargs)
    if result is not None:
        try:
            print_summary(result, args.timings)
        except KeyboardInterrupt:  # (Ctrl-C's own effect again once the run is over)
            print("interrupted: stopped at once", file=sys.stderr)
            return 128 + 2
    return status


@_ends_quietly_on_a_closed_pipe
def predict_command(predict, args, program=None, **kwargs):
    """``predict(**kwargs)`` as a command: the saved model (``--save-model``)
    refused first when it cannot be read, is not one, or is another
    ``program``'s (the name its training gave
    :meth:`~int8store.training.runner.Run.resume`)
    (:func:`~int8store.training.options.check_saved_model`), before the
    data is read and the model built; then errors and interrupts reported
    as a run's (:func:`run_reporting_errors`). Returns the exit status."""
    try:
        _refuse_training_options(args)
        check_saved_model(args.save_model, getattr(args, "normalize", None), program)
    except Int8StoreError as error:
        return _said(error)
    for line in files_said(args):
        print(line)
    return run_reporting_errors(predict, **kwargs)[1]


#: What ``--predict`` reads: the saved model and the data, normalized as the
#: model was trained on it.
PREDICT_OPTIONS = ("--predict", "--save-model", "--dataset", "--normalize")


def _refuse_training_options(args):
    """Refuse the training options given to ``--predict``, which would not
    use them (they were ignored without a word, a bad one too)."""
    ignored = [o for o in getattr(args, "options_given", ()) if o not in PREDICT_OPTIONS]
    if ignored:
        raise ArgumentError(f"--predict reads the saved model (--save-model) and the data "
                            f"(--dataset, --normalize as the model was trained), and "
                            f"{', '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} for "
                            f"training: leave {'it' if len(ignored) == 1 else 'them'} out")


def _set_up_and(train, args, **kwargs):
    """JAX mode set up (its first line said), then ``train``."""
    setup = None
    if args.mode == "jax":
        from ..backend.jax.run_setup import set_up_run

        setup = set_up_run(compile_cache=not args.no_compile_cache,
                           deterministic=args.deterministic)
        print("... " + setup.describe())
    result = train(**kwargs, **run_options(args))
    if setup is not None:
        result["compilations"] = setup.compilations.describe()
    return result


def run_reporting_errors(function, *args, **kwargs):
    """``function(*args, **kwargs)`` with errors, interrupts and failed
    checkpoint writes reported as the module docstring says: ``(result,
    exit status)``, the result None after an error or a second interrupt
    (which may come as the run ends: while its failed writes are said, too)."""
    try:
        with stop_requests(until_armed=True) as stop, checkpoint_writes() as writes:
            try:
                result = function(*args, **kwargs)
            except Int8StoreError as error:
                return None, _said(error)
            except MemoryError:  # (a --hidden of 10**9: numpy's traceback of 477 GiB)
                return None, _said("out of memory: the model or its minibatches do not fit; "
                                   "choose a smaller model (--hidden, --nkerns) or --batch-size "
                                   "(python -m int8store budget plans the tutorials' own sizes)")
            finally:
                if writes.summary():
                    print(writes.summary(), file=sys.stderr)
    except KeyboardInterrupt as interrupt:  # the second Ctrl-C
        print(f"{interrupt or 'interrupted'}: stopped at once", file=sys.stderr)
        return None, 128 + getattr(interrupt, "signal", 2)
    return result, stop.exit_status


def _said(error):
    """``error`` said in one line; the exit status 2."""
    print(f"error: {error}", file=sys.stderr)
    return 2


def print_summary(result, timings=False):
    """The run's figures: the best validation error, the test error of the
    best model and how many examples it is over, its iteration (where the
    tutorial says it) or that no validation was run yet, the epochs run,
    the images' memory, int8 against float32, and with ``timings`` where the
    time went."""
    from ..memory.estimates import memory_table

    print()
    if math.isinf(result["best_validation_loss"]):  # (the loop's start: no validation yet)
        print("%s before the first validation: there is no best model or test error to report"
              % ("interrupted" if result.get("interrupted") else "stopped"))
    else:
        if result.get("interrupted"):
            print("interrupted: the figures below are the best model so far")
        print("best validation error  %f %%" % (result["best_validation_loss"] * 100.))
        print("test error             %f %% over %i examples"
              % (result["test_score"] * 100., result["test_count"]))
        if "best_iter" in result:
            print("best iteration         %i" % result["best_iter"])
    print("epochs                 %i" % result["epochs"])
    print()
    print("Images in memory, as int8 against the classic float32:")
    print(memory_table(result["datasets"]))
    if timings:
        compiled = result.get("compilations")
        # (in JAX mode a split's first score traces its program, then compiles or loads it)
        first = " (%.2f s the first score of each split)" % result["scoring_first_seconds"] \
            if compiled else ""
        print("timings: training loop %.2f s, of which scoring the splits %.2f s in %i calls%s%s"
              % (result["seconds"], result["scoring_seconds"], result["scoring_calls"], first,
                 "; " + compiled if compiled else ""))
