"""The command-line options of a training run, the same in every bundled
tutorial: :func:`add_arguments` adds them to a parser (the training's own,
with each tutorial's defaults, then int8store's), :func:`run_options` turns
the parsed ones into :class:`~int8store.training.runner.Run`'s keywords,
once :func:`check_options` has refused those that cannot go together.
"""

import argparse
import math
import os
import re

from ..augment.spec import Augmentation, refuse_alternating_shuffled
from ..codes.vocabulary import NORMALIZATIONS
from ..errors import ArgumentError, shortened
from ..order.shuffle import check_seed
from ..runtime.arguments import devices_option, size_option
from ..sources import class_folder_trees
from ..store.atomic import check_not_a_source
from ..store.checkpoint import npz_path
from .parameters import open_saved_model, saved_model_description
from .run import check_options_resumed
from .steps import ACCELERATOR_STEPS

__all__ = ["add_arguments", "check_options", "check_saved_model", "files_said", "run_options",
           "RUN_OPTIONS"]

#: The parsed options that are :class:`~int8store.training.runner.Run`'s keywords.
RUN_OPTIONS = ("mode", "classic_count", "max_device_bytes", "max_memory", "seed", "devices",
               "steps_per_call", "augment", "augment_seed", "normalize", "checkpoint", "resume",
               "progress")


def add_arguments(parser, epochs, learning_rate, batch_size, save_model=None):
    """Add the training's options with a tutorial's defaults (``--dataset``,
    ``--epochs``, ``--learning-rate``, ``--batch-size``, ``--save-model``),
    then int8store's: where the splits are held and how they are fed
    (``--mode``, ``--max-device-bytes``, ``--max-memory``, ``--seed``,
    ``--devices`` and several processes, ``--normalize``, ``--augment``),
    how the steps are called (``--steps-per-call``), how the splits are
    scored (``--classic-count``), checkpoints (``--checkpoint``,
    ``--resume``), what is printed (``--progress``, ``--timings``) and how
    JAX mode is set up (``--no-compile-cache``, ``--deterministic``)."""
    training = parser.add_argument_group("training")
    training.add_argument("--dataset", default="mnist.pkl.gz",
                          help="what int8store.load_data reads: 'mnist.pkl.gz' (here, ../data/, "
                               "the cache, or downloaded), 'digits' (offline), 'mnist', "
                               "'cifar10', an .npz, an int8store .h5 store or another HDF5 "
                               "file, a folder of IDX files, class folders of images (as a "
                               "folder, .zip or .tar) (default: %(default)s)")
    training.add_argument("--epochs", type=int, default=epochs,
                          help="maximal number of epochs (default: %(default)s)")
    training.add_argument("--learning-rate", type=float, default=learning_rate,
                          help="SGD step (default: %(default)s)")
    training.add_argument("--batch-size", type=int, default=batch_size,
                          help="minibatch size (default: %(default)s)")
    training.add_argument("--save-model", default=save_model, metavar="PATH",
                          help="where the best model's parameters go (.npz, added to a name "
                               "without it), replaced at each improvement (default: %s)"
                               % (save_model or "not saved"))
    data = parser.add_argument_group("where the splits are held and how they are fed")
    data.add_argument("--mode", choices=("c", "jax"), default="c",
                      help="'c': the library's C backend on the CPU; 'jax': JAX's default "
                           "device, a GPU when JAX sees one (default: %(default)s)")
    data.add_argument("--max-device-bytes", type=size_option("--max-device-bytes"), metavar="SIZE",
                      help="feed each split to the device in shards of at most SIZE bytes "
                           "(e.g. 16MiB), read from the file for a store (default: hold it all)")
    data.add_argument("--max-memory", type=size_option("--max-memory"), metavar="SIZE",
                      help="memory ceiling, e.g. '4GiB': a store larger than it is streamed "
                           "(default: half the physical memory)")
    data.add_argument("--seed", type=int,
                      help="take the training examples in a new order each epoch, from this "
                           "seed (default: the split's own order)")
    data.add_argument("--normalize", choices=NORMALIZATIONS, default="unit",
                      help="the images as the model sees them: 'unit' the source's own scale "
                           "(the classic [0, 1)), 'batch' or 'dataset' centred on the "
                           "minibatch's or the training split's mean, 'channel' on each "
                           "channel's, 'standard' each channel centred and divided by its "
                           "standard deviation (colour sets), 'none' the raw codes "
                           "(default: %(default)s)")
    data.add_argument("--augment", metavar="LIST",
                      help="augment each training minibatch inside the step, from its int8 "
                           "codes: comma-separated translate=R (up to R pixels each way), "
                           "fill=zero|edge|reflect, flip or flip=alternate (not for digits; "
                           "alternate not with --seed), "
                           "cutout=S (an SxS square set to black); e.g. translate=2,cutout=8 "
                           "(default: none)")
    data.add_argument("--augment-seed", type=int, metavar="N",
                      help="with --augment: the augmentation's draws, from (N, epoch, "
                           "minibatch, example) (default: 1)")
    data.add_argument("--devices", type=devices_option, metavar="N",
                      help="JAX mode over N devices ('all': every one JAX sees): each split's "
                           "rows spread over them, the same minibatches as on one "
                           "(default: one)")
    data.add_argument("--coordinator", metavar="HOST:PORT",
                      help="run as one of several processes (JAX mode): process 0's address; "
                           "then --devices defaults to all of every process's")
    data.add_argument("--num-processes", type=int, metavar="N", help="processes in the run")
    data.add_argument("--process-id", type=int, metavar="I", help="this one (0 to N-1)")
    calls = parser.add_argument_group("calls, scoring and checkpoints")
    calls.add_argument("--steps-per-call", type=int, metavar="K",
                       help="make up to K minibatch updates in one call of the compiled step "
                            "(the same results; it pays in JAX mode, where a call costs more "
                            f"than a small model's step; default: {ACCELERATOR_STEPS} there, "
                            "at most an epoch's, but 1 over several CPU devices, and on the C "
                            "backend)")
    calls.add_argument("--classic-count", action="store_true",
                       help="score whole minibatches only, dropping the remainder of the "
                            "validation and test splits, as the classic tutorial (and its "
                            "published figures) did; by default every example is scored")
    calls.add_argument("--checkpoint", metavar="PATH",
                       help="write the run's checkpoint (.npz, added to a name without "
                            "it): the parameters, the early "
                            "stopping state, the best model and the data position, at each "
                            "validation, when stopped by Ctrl-C or SIGTERM and at the end; "
                            "replaced each time, never half-written (default: none)")
    calls.add_argument("--resume", metavar="PATH",
                       help="go on from a run checkpoint where it stopped, exactly as if it "
                            "had not: the same data, model, batch size, seeds, augmentation, "
                            "normalization, learning rate and scoring (another is refused, the "
                            "difference named); the "
                            "device count may change, and streaming where --seed does not "
                            "shuffle")
    shown = parser.add_argument_group("what is printed, and JAX mode's set-up")
    shown.add_argument("--progress", action="store_true",
                       help="condense the per-epoch lines: a progress bar on a terminal (gone "
                            "at the end, the summary lines left); in a pipe, a tenth of them and "
                            "the last epoch's (default: every line, as the classic tutorial "
                            "printed)")
    shown.add_argument("--timings", action="store_true",
                       help="print where the run's time went: XLA's compilations, the "
                            "training loop, the scoring of the splits")
    shown.add_argument("--no-compile-cache", action="store_true",
                       help="JAX mode: compile every XLA program anew (default: keep them in a "
                            "cache folder, ~/.cache/int8store/jax, so that a second run "
                            "compiles nothing)")
    shown.add_argument("--deterministic", action=argparse.BooleanOptionalAction, default=None,
                       help="JAX mode on a GPU: deterministic GPU ops, so that a run "
                            "stopped and resumed ends as the uninterrupted one (default: on)")
    return parser


def check_options(args, program=None):
    """Refuse parsed options that cannot go together, before anything is
    loaded or JAX is used (:class:`~int8store.ArgumentError`, naming them);
    and a checkpoint resumed of another ``program``, where given (the name
    the run gives :meth:`~int8store.training.runner.Run.resume`)."""
    if args.epochs < 1:
        raise ArgumentError(f"--epochs {args.epochs}: expected 1 or more epochs")
    # (NaN or infinity would train to NaN and save NaNs; a negative rate climbs the cost)
    if not math.isfinite(args.learning_rate) or args.learning_rate < 0:
        raise ArgumentError(f"--learning-rate {args.learning_rate:g}: expected a finite number, "
                            "0 or more")
    if args.steps_per_call is not None and args.steps_per_call < 1:  # (before JAX's set-up)
        raise ArgumentError(f"--steps-per-call {args.steps_per_call}: expected 1 or more")
    if args.devices not in (None, 1) and args.mode != "jax" and not args.coordinator:
        raise ArgumentError("--devices needs --mode jax: the C backend runs on one CPU")
    if args.mode != "jax" and not args.coordinator:  # (options of JAX's set-up, else ignored)
        given = [option for option, on in (
            ("--no-compile-cache", args.no_compile_cache),
            ("--deterministic" if args.deterministic else "--no-deterministic",
             args.deterministic is not None)) if on]
        if given:
            raise ArgumentError(f"{' and '.join(given)} set{'s' if len(given) == 1 else ''} up "
                                "JAX mode (--mode jax): the C backend compiles no XLA program "
                                "and runs the same ops each time")
    if args.augment_seed is not None and not args.augment:
        raise ArgumentError(f"--augment-seed {args.augment_seed} seeds an augmentation: give "
                            "--augment LIST too")
    if args.augment is not None:  # (checked in full later, against the images)
        refuse_alternating_shuffled(Augmentation.parse(args.augment, given="--augment"),
                                    args.seed, "--augment")
    for option in ("seed", "augment_seed"):
        if getattr(args, option, None) is not None:
            check_seed(getattr(args, option), "--" + option.replace("_", "-"), option)
    _check_processes(args.coordinator, args.num_processes, args.process_id)
    _check_files(args.checkpoint, args.save_model, args.resume, getattr(args, "dataset", None),
                 resumed=dict(program=program, seed=args.seed, augment=args.augment,
                              augment_seed=args.augment_seed, learning_rate=args.learning_rate,
                              normalize=args.normalize, classic_count=args.classic_count))


def _check_files(checkpoint, save_model, resume, dataset, resumed):
    """The run's checkpoint and the best model: two files, never one, and
    neither the dataset's own file nor inside its class folders; they and
    the checkpoint resumed: files, not folders; and the one resumed there,
    read as far as it can be without the run, and taken with the options
    ``resumed`` names (the program, the seeds, the augmentation, the
    learning rate, the normalization, the scoring:
    :func:`~.run.check_options_resumed`), before the data is read and the
    model built (a file cut short was refused once they were)."""
    for option, path, what, example in (
            ("--save-model", save_model, "the best model is written to", "best_model.npz"),
            ("--checkpoint", checkpoint, "the run's checkpoint is written to", "run.npz"),
            ("--resume", resume, "a run's --checkpoint wrote", "run.npz")):
        folder = path and _folder(path)
        if folder:
            raise ArgumentError(f"{option} {_named(path, folder)}: a folder; expected the .npz "
                                f"file {what}, e.g. {os.path.join(folder, example)}")
    for option, path in (("--save-model", save_model), ("--checkpoint", checkpoint)):
        on_the_way = path and _file_on_the_way(npz_path(path))
        if on_the_way:  # (each write failed, the run went on, and it said the folder was made)
            raise ArgumentError(f"{option} {_named(path, npz_path(path))}: {on_the_way} is a "
                                "file, not a folder, and nothing can be written in it; give "
                                "a path in a folder")
    if resume:
        _check_written("--resume", resume, "checkpoint", "--checkpoint",
                       "or no --resume to start afresh")
        check_options_resumed(resume, **resumed)
    for option, path in (("--save-model", save_model), ("--checkpoint", checkpoint)):
        if path and dataset and os.path.isfile(str(dataset)) \
                and os.path.realpath(npz_path(path)) == os.path.realpath(str(dataset)):
            raise ArgumentError(f"{option} {_named(path, npz_path(path))}: the dataset's own "
                                f"file (--dataset {dataset}), which the run would overwrite; "
                                "give another path")
    # (written in the class folders read, --dataset ., it was refused as not an image by the
    # next run and by --predict)
    trees = class_folder_trees(str(dataset)) if dataset else []
    for option, path, made in (("--save-model", save_model, "the best model"),
                               ("--checkpoint", checkpoint, "the run's checkpoint")):
        if path and trees:
            check_not_a_source(npz_path(path), [], "train on", made, trees,
                               named=f"{option} {_named(path, npz_path(path))}")
    if resume and save_model and _same_file(resume, save_model):
        raise ArgumentError(f"--resume {resume} and --save-model {save_model}: the same file, "
                            f"{npz_path(save_model)}, and the best model would overwrite the run "
                            "checkpoint resumed; give --save-model another path")
    if checkpoint and save_model and _same_file(checkpoint, save_model):
        raise ArgumentError(f"--checkpoint {checkpoint} and --save-model {save_model}: the same "
                            f"file, {npz_path(save_model)}, which each would overwrite with its "
                            "own; give them two paths")


def check_saved_model(path, normalize=None, program=None):
    """``--predict``'s model, the one ``--save-model`` names: a file (not a
    folder) there, a saved model read as far as it can be without the
    model (:func:`~.parameters.open_saved_model`), before the data is read
    and the model built; and trained on images normalized as ``normalize``
    (``--normalize``) by ``program`` (a tutorial's name), where it records them."""
    folder = path and _folder(path)
    if folder:
        raise ArgumentError(f"--save-model {_named(path, folder)}: a folder; expected the .npz "
                            "file a run's --save-model wrote, e.g. "
                            f"{os.path.join(folder, 'best_model.npz')}")
    if not path:
        raise ArgumentError("--predict without --save-model: expected --save-model PATH, the "
                            ".npz file a run's --save-model wrote")
    _check_written("--save-model", path, "saved model", "--save-model",
                   "or a run without --predict to write one")
    description = saved_model_description(open_saved_model(path))
    saved_by = description.get("program")
    if program is not None and isinstance(saved_by, str) and saved_by != program:
        raise ArgumentError(f"{npz_path(path)}: the model of {shortened(saved_by)}.py, not of "
                            f"{program}.py: its --predict reads a model its own --save-model "
                            "wrote")
    trained_on = description.get("normalize")
    if normalize is not None and trained_on is not None and trained_on != normalize:
        raise ArgumentError(f"{npz_path(path)}: a model trained on images normalized "
                            f"{trained_on!r}, read here as {normalize!r} (--normalize), which "
                            f"would predict other labels: give --normalize {trained_on}")


def _check_written(option, path, noun, writer, otherwise):
    """A file that a run's ``writer`` option wrote, given to ``option``:
    there, ``.npz`` added to a name without it as it was when written; a
    refusal names the path as given and the file looked for."""
    file = npz_path(path)
    if os.path.exists(file):
        return
    if os.path.isfile(str(path)):
        raise ArgumentError(f"{option} {path}: not a {noun}: a run's {writer} writes .npz files "
                            f"(this one would be {file})")
    raise ArgumentError(f"{option} {_named(path, file)}: no such {noun}; expected the .npz file "
                        f"a run's {writer} wrote, {otherwise}")


def _folder(path):
    """The folder ``path`` names, as given or with ``.npz`` added, or by a
    separator at its end whether it is there or not (``runs/``, which was
    written as a file ``runs/.npz``); None if none."""
    if str(path).endswith(tuple(s for s in (os.sep, os.altsep) if s)):
        return str(path)
    return next((name for name in (str(path), npz_path(path)) if os.path.isdir(name)), None)


def _file_on_the_way(path):
    """The file (not a folder) that stands where a folder of ``path`` would
    be (``notes.txt`` in ``notes.txt/run.npz``); None if none."""
    folder = os.path.dirname(path)
    while folder and not os.path.lexists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder if folder and os.path.exists(folder) and not os.path.isdir(folder) else None


def _named(path, file):
    """``path`` as given, and the file it names where that differs."""
    return str(path) if file == str(path) else f"{path} ({file})"


def _same_file(first, second):
    """Whether two paths name one ``.npz`` (:func:`npz_path`), existing or not."""
    return os.path.realpath(npz_path(first)) == os.path.realpath(npz_path(second))


def _check_processes(coordinator, count, index):
    """--coordinator with --num-processes and --process-id, all or none."""
    if coordinator is None:
        for option, value in (("--num-processes", count), ("--process-id", index)):
            if value is not None:
                raise ArgumentError(f"{option} {value} without --coordinator: expected "
                                    "--coordinator HOST:PORT (process 0's address) with it, or "
                                    "neither for a run of one process")
        return
    host, _, port = coordinator.rpartition(":")
    if not host or not re.fullmatch(r"[0-9]{1,5}", port) or not 0 < int(port) < 65536:
        raise ArgumentError(f"--coordinator {coordinator}: expected HOST:PORT, process 0's "
                            "address and a port from 1 to 65535 (e.g. localhost:12345)")
    if count is None or index is None:
        raise ArgumentError(f"--coordinator {coordinator}: expected --num-processes N and "
                            "--process-id I (0 to N-1) with it")
    if count < 1:
        raise ArgumentError(f"--num-processes {count}: expected 1 or more processes")
    if not 0 <= index < count:
        raise ArgumentError(f"--process-id {index}: expected 0 to {count - 1}, one of the "
                            f"--num-processes {count}")


def files_said(args):
    """The line said once as a run starts for each of its files named
    without ``.npz``, which is added (as ``numpy.savez`` adds it): where the
    best model and the checkpoint are written, or, with ``--predict``, where
    the saved model is read. None for a name ending in ``.npz``. Then, for a
    run's files, each folder that is not there yet and will be made."""
    predict = getattr(args, "predict", False)
    files = [("--save-model", args.save_model, "the saved model is read from" if predict
              else "the best model is written to")]
    if not predict:
        files.append(("--checkpoint", args.checkpoint, "the run's checkpoint is written to"))
    lines = [f"... {what} {npz_path(path)} ({option} {path}: .npz added, as numpy.savez adds it)"
             for option, path, what in files if path and npz_path(path) != str(path)]
    if not predict:  # (made when first written, as convert makes its output's: said here)
        lines += [f"... the folder {folder} is made for {os.path.basename(npz_path(path))} "
                  f"({option} {path})" for option, path, _ in files
                  if path and (folder := os.path.dirname(npz_path(path)))
                  and not os.path.isdir(folder)]
    return lines


def run_options(args):
    """The parsed options :class:`~int8store.training.runner.Run` takes."""
    return {name: getattr(args, name) for name in RUN_OPTIONS}
