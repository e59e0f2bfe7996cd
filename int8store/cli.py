"""The ``int8store`` command: convert archives, describe, verify and preview stores.

    int8store convert SRC... -o OUT.h5 [--valid-size N] [--test-size N] [--seed S]
                      [--keep-order] [--lossy] [--resize HxW] [--keys SPLIT=IMAGES:LABELS]
                      [--max-memory SIZE] [--force]
    int8store info FILE...
    int8store verify [--strong] FILE...
    int8store manifest FILE
    int8store budget [--dataset D] [--model logistic|mlp|lenet5] [--batch-size B]
                     [--device-memory SIZE] [--margin F] [--devices N|all] [--mode M] [--dtype T]
    int8store preview SRC... -o GRID.png [--split S] [--count N] [--scale K] [--force]

Domain errors (bad or hostile input, a full disk, an unwritable folder, a
ceiling reached) and a mistyped command line (an option it does not know
named, with the nearest it does) print one line on stderr and exit with
status 2; an
interrupt (Ctrl-C, SIGTERM) exits with 128 + the signal's number, leaving
no output; a closed pipe (``int8store manifest FILE | head -1``) ends it
quietly with 128 + SIGPIPE. A traceback means a bug in int8store.
"""

import argparse
import contextlib
import os
import shlex
import signal
import sys

from .errors import ArgumentError, Int8StoreError, shortened
from .memory.models import MODELS
from .runtime.arguments import OneLineParser, devices_option, size_option
from .runtime.files import end_with_stdout_closed

__all__ = ["main"]


def _valid(text):
    """A count (``500``, ``1e3``: a whole number of at least one written with
    an exponent is a count too) or a fraction (``0.1``, ``1e-1``)."""
    try:
        if not any(c in text for c in ".eE"):
            return int(text)
        value = float(text)
        return int(value) if "." not in text and value >= 1 and value.is_integer() else value
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"expected an integer count or a fraction such as 0.1, got {text!r}") from None


def _size(text):
    from .sources.image_files import parsed_resize

    try:
        return parsed_resize(text)
    except ArgumentError:
        raise argparse.ArgumentTypeError(f"expected ROWSxCOLS such as 28x28, got {text!r}") from None


def _keys(text):
    try:
        split, pair = text.split("=", 1)
        images, labels = pair.split(":", 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SPLIT=IMAGES:LABELS, got {text!r}") from None
    return split, (images, labels)


#: What convert reads, in words (its --help and its description).
SOURCE_KINDS = (
    "the four MNIST IDX files or a folder holding them (gzipped or not); mnist.pkl.gz; "
    "CIFAR-10's cifar-10-python.tar.gz or its folder cifar-10-batches-py/ (colour, 32x32x3); "
    "an .npz of image and label arrays; a folder, .zip or .tar(.gz) of class folders of "
    "images (CLASS/IMAGE, or SPLIT/CLASS/IMAGE with SPLIT train, valid or test); an HDF5 "
    "file of image and label datasets; an int8store store; or the names digits "
    "(scikit-learn's, offline), mnist and cifar10 (downloaded into the cache)")


class _PrintVersion(argparse.Action):
    """``--version``: the installed version, read only when asked (reading
    the package's metadata takes longer than the rest of a command's start)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print int8store's version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from .runtime.version import package_version

        print(f"int8store {package_version()}")
        parser.exit()


def _add_planning_options(parser, seed_note):
    """How a source's splits are planned (plan.splits): convert's options, and
    preview's, so that a preview shows the split a conversion gives."""
    parser.add_argument("--valid-size", type=_valid, metavar="N",
                        help="for a source without a validation split: N training examples "
                             "(an integer) or a fraction strictly between 0 and 1 (e.g. 0.1) "
                             "become one, as load_data(valid_size=N) (default: a sixth)")
    parser.add_argument("--test-size", type=_valid, metavar="N",
                        help="for a source without a test split: cut one of N training "
                             "examples (or a fraction), stratified by class, before the "
                             "validation split, as load_data(test_size=N) (default: a sixth)")
    parser.add_argument("--seed", "--valid-seed", dest="seed", type=int, metavar="S",
                        help=f"the seed of the shuffle of a source sorted by class and of the "
                             f"stratified cuts{seed_note}; from a source that keeps "
                             "its order, also draws the validation split stratified instead of "
                             "taking the last ones; as load_data(valid_seed=S) (default: 0)")
    parser.add_argument("--keep-order", action="store_true",
                        help="keep the source's order even where its labels run by class "
                             "(default: such a source is shuffled)")


def _parser():
    parser = OneLineParser(
        prog="int8store", description="Convert image archives into int8store files and inspect them.")
    parser.add_argument("--version", action=_PrintVersion)
    commands = parser.add_subparsers(dest="command", required=True)
    convert = commands.add_parser(
        "convert", help="convert an archive into an int8store .h5 file",
        description=f"Convert image data into an int8store file: the checksummed int8 codes "
                    f"of train, valid and test. SRC is one of: {SOURCE_KINDS}. A source whose "
                    "labels run by class (class folders, arrays sorted by label) is shuffled, "
                    "from a seed recorded in the store; IDX, mnist.pkl.gz, CIFAR-10 and the "
                    "digits keep their order, as their published figures need. Without a "
                    "validation split, a sixth of train becomes one: drawn stratified by class "
                    "(the last sixth, from a source that keeps its order). The same command "
                    "writes the same store.")
    convert.add_argument("sources", nargs="+", metavar="SRC", help="the source (see above)")
    convert.add_argument("-o", "--output", required=True, metavar="OUT.h5",
                         help="the store to write; a missing folder is created")
    _add_planning_options(convert, ", recorded in the store")
    convert.add_argument("--lossy", action="store_true",
                         help="quantize data int8 cannot hold exactly to 256 levels and report "
                              "the largest error (default: refuse such data)")
    convert.add_argument("--resize", type=_size, metavar="HxW",
                         help="resize image files to H rows, W columns, stretched (the aspect "
                              "ratio not kept, as torchvision's Resize((H, W))) with Pillow's "
                              "bicubic filter (default: keep their size, which all must share)")
    convert.add_argument("--keys", type=_keys, action="append", metavar="SPLIT=IMAGES:LABELS",
                         help="the arrays of a split in an .npz or HDF5 source (repeatable; "
                              "only the splits named are read; default: found by their names, "
                              "or their shapes for one pair)")
    convert.add_argument("--max-memory", type=size_option("--max-memory"), metavar="SIZE",
                         help="most memory the source may ask for at once (a label array, a "
                              "pickled array, one image), e.g. 2GiB (default: half the physical "
                              "memory); every size a file announces is also checked against the file")
    convert.add_argument("--force", action="store_true",
                         help="replace OUT.h5 if it exists (default: refuse)")
    info = commands.add_parser(
        "info", help="describe an int8store file",
        description="Describe an int8store file: its splits, image shape, encoding, bytes as "
                    "int8 and float32, how its examples were ordered, and where it came from. "
                    "Reads the manifest only (no options, nothing to default): "
                    "'int8store verify' checks the data.")
    info.add_argument("files", nargs="+", metavar="FILE", help="int8store .h5 files")
    verify = commands.add_parser(
        "verify", help="check every checksum of an int8store file",
        description="Check the manifest, the HDF5 metadata and every chunk of data against "
                    "their checksums (XXH3-128 per chunk: accidents). With --strong, also "
                    "recompute each split's BLAKE3 (forgery): a signature of the manifest then "
                    "covers every byte of the file.")
    verify.add_argument("--strong", action="store_true",
                        help="also recompute each split's BLAKE3 digest (about twice the "
                             "time of a plain verify); a store written before strong digests "
                             "is refused, saying so (default: XXH3-128 per chunk only)")
    verify.add_argument("files", nargs="+", metavar="FILE",
                        help="int8store .h5 files, each checked whatever the one before "
                             "showed (exit status 2 if any failed)")
    manifest = commands.add_parser(
        "manifest", help="print a store's manifest (JSON): a signature of it covers every byte "
                         "of the file once 'int8store verify --strong' passes",
        description="Print the manifest (JSON) that describes and checksums the file. To "
                    "guard against forgery, sign this text; before use, check the signature, "
                    "that this command still prints the signed text, and that 'int8store "
                    "verify --strong FILE' passes: the signature then covers every byte (the "
                    "metadata through the manifest's SHA-256, the data through each split's "
                    "BLAKE3). No options, nothing to default.")
    manifest.add_argument("file", help="an int8store .h5 file")
    budget = commands.add_parser(
        "budget", help="will it fit? data and model memory, and the largest batch, int8 "
                       "against float32",
        description="Will a dataset and a tutorial's model fit a device? The data's bytes "
                    "held as int8 and as float32, the model's memory at a batch size, and the "
                    "largest batch that fits, each way. By default: the digits, the LeNet5 "
                    "model (convolutional_mlp.py), its tutorial's batch size, the memory JAX "
                    "or nvidia-smi reports for one device, 10 % of it kept free.")
    budget.add_argument("--dataset", default="digits",
                        help="anything load_data takes (default: %(default)s)")
    budget.add_argument("--model", choices=tuple(MODELS), default="lenet5",
                        help="the tutorial's model: logistic (logistic_sgd.py), mlp (mlp.py, "
                             "500 hidden units) or lenet5 (convolutional_mlp.py) (default: "
                             "%(default)s)")
    budget.add_argument("--batch-size", type=int, metavar="B",
                        help="the batch size to estimate (default: the tutorial's)")
    budget.add_argument("--device-memory", type=size_option("--device-memory"), metavar="SIZE",
                        help="the memory to plan for, e.g. 1GiB (default: asked of the "
                             "device through JAX or nvidia-smi; with --mode c, this machine's "
                             "memory)")
    budget.add_argument("--devices", type=devices_option, default=1, metavar="N",
                        help="plan for N devices (or all that JAX sees), each holding a block "
                             "of every split and a part of each minibatch (default: %(default)s)")
    budget.add_argument("--margin", type=float, default=0.1,
                        help="fraction of the memory kept free for the framework and "
                             "fragmentation (default: %(default)s)")
    budget.add_argument("--mode", choices=("jax", "c"), default="jax",
                        help="how the step runs: 'jax' (XLA, on an accelerator) or 'c' (the "
                             "C backend on the CPU, whose order of evaluation holds more) "
                             "(default: %(default)s)")
    budget.add_argument("--dtype", choices=("float32", "float64"),
                        help="the model's float type (default: the tutorials': float32 in JAX "
                             "mode, as on an accelerator; floatX with --mode c, float64 unless "
                             "the library's flags say otherwise)")
    preview = commands.add_parser(
        "preview", help="a PNG grid of sample images, one row per class",
        description="Write a PNG grid of the first images of each class of a split, decoded "
                    "as training reads them: a store's int8 codes, or any source through the "
                    "planning step load_data uses. See what a conversion gives before training; "
                    "a class the split lacks is named.")
    preview.add_argument("sources", nargs="+", metavar="SRC",
                         help="a store, or anything convert and load_data take")
    preview.add_argument("-o", "--output", required=True, metavar="GRID.png",
                         help="the PNG to write; a missing folder is created")
    preview.add_argument("--split", default="train", choices=("train", "valid", "test"),
                         help="the split shown (default: %(default)s)")
    preview.add_argument("--count", type=int, default=8, metavar="N",
                         help="images per class (default: %(default)s)")
    preview.add_argument("--scale", type=int, metavar="K",
                         help="enlarge each image K times (default: to at least 32 pixels)")
    preview.add_argument("--resize", type=_size, metavar="HxW",
                         help="as for convert (default: the images' own size)")
    preview.add_argument("--keys", type=_keys, action="append", metavar="SPLIT=IMAGES:LABELS",
                         help="as for convert (default: found by their names or shapes)")
    preview.add_argument("--max-memory", type=size_option("--max-memory"), metavar="SIZE",
                         help="as for convert (default: half the physical memory)")
    _add_planning_options(preview, ", as convert takes it (a store's splits are its own)")
    preview.add_argument("--lossy", action="store_true",
                         help="as for convert: data int8 cannot hold exactly shown quantized "
                              "(default: refused)")
    preview.add_argument("--augment", metavar="LIST",
                         help="with --augmented: the augmentation, as the tutorials take it "
                              "(e.g. translate=2,flip,cutout=8; default: none)")
    preview.add_argument("--augmented", type=int, metavar="SEED",
                         help="draw the images augmented by --augment as training sees them: "
                              "the grid's cells, row by row, as one minibatch under SEED "
                              "(default: as stored)")
    preview.add_argument("--epoch", type=int, default=0, metavar="E",
                         help="with --augmented: the epoch drawn (default: %(default)s)")
    preview.add_argument("--force", action="store_true",
                         help="replace GRID.png if it exists (default: refuse)")
    return parser


def main(argv=None):
    """Run the command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    from .runtime.interrupts import interrupts_ignored, interrupts_remembered

    try:
        # Installed around the whole command, imports included: an interrupt
        # caught and re-wrapped on its way up (as class creation does) still
        # ends here as an interrupt, not as a traceback.
        with interrupts_remembered():
            status = _run(args, argv)
            with _writing_stdout():  # (a closed pipe is met here, not as Python exits)
                sys.stdout.flush()
    except Int8StoreError as error:
        return _fail(str(error))
    except (BrokenPipeError, _PipeClosed):
        return end_with_stdout_closed()
    except _StdoutFailed as failure:
        written = f"; {_what_was_written(args)}" if getattr(args, "output", None) else ""
        _fail(f"cannot write to the standard output ({failure}){written}")
        return 1  # (2 says the files failed: verify's checksums, convert's sources)
    except KeyboardInterrupt as interrupt:
        with interrupts_ignored():  # (Ctrl-C pressed again: the line is still said, once)
            # (verify, info, budget write nothing: no word of what was written)
            written = f": {_what_was_written(args)}" if hasattr(args, "output") else ""
            _say(f"{str(interrupt) or 'interrupted'}{written}")
        return 128 + getattr(interrupt, "signal", signal.SIGINT)
    except MemoryError:
        return _fail("out of memory: the data does not fit; pass a lower --max-memory to be "
                     "told which file asks for too much, or use a machine with more memory")
    except RecursionError:
        return _fail("the input is nested too deeply to be read")
    except OSError as error:  # a file that cannot be read or written: the system says why
        return _fail(_system_says(error))
    return status or 0


class _PipeClosed(Exception):
    """What reads stdout is gone (not an OSError: no ``except OSError`` on
    the way up takes it for a failure of the file being read or written)."""


class _StdoutFailed(Exception):
    """stdout could not be written (a full disk, ``> /dev/full``): not the
    fault of the files the command reads or writes, nor theirs to report."""


@contextlib.contextmanager
def _writing_stdout():
    """A failure to write stdout raised as stdout's (:class:`_PipeClosed`,
    :class:`_StdoutFailed`)."""
    try:
        yield
    except BrokenPipeError:
        raise _PipeClosed() from None
    except OSError as error:
        raise _StdoutFailed(error.strerror or error) from None


def _print(text):
    """``print(text)`` to stdout at once, a failure named as stdout's, text
    it cannot encode escaped (:func:`_escaped`)."""
    with _writing_stdout():
        print(_escaped(text, sys.stdout), flush=True)


def _escaped(text, stream):
    """``text`` with what ``stream``'s encoding cannot hold (a file name's
    bytes that are not UTF-8, any name on an ASCII stream) escaped."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, "backslashreplace").decode(encoding)


def _system_says(error):
    """An :class:`OSError` in words: the file, and why."""
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror or error}"


def _each_file(files, action):
    """``action(file, number)`` for each of ``files``, an error in one said
    on its line and the others still done, as ``sha256sum -c`` does; 2 if
    any failed."""
    status = 0
    for number, file in enumerate(files):
        try:
            action(file, number)
        except Int8StoreError as error:
            status = _fail(str(error))
        except BrokenPipeError:  # (what reads the output is gone: the command ends)
            raise
        except OSError as error:
            status = _fail(_system_says(error))
    return status


def _run(args, argv):
    if args.command == "convert":
        from .converter import convert
        from .order.shuffle import check_seed

        if args.seed is not None:  # (convert names valid_seed, its keyword)
            check_seed(args.seed, "--seed", "seed")
        path = convert(args.sources, args.output, valid_size=args.valid_size,
                       valid_seed=args.seed, lossy=args.lossy, resize=args.resize,
                       keys=dict(args.keys) if args.keys else None, force=args.force,
                       command_line=shlex.join(["int8store"] + argv),
                       max_memory=args.max_memory, report=_print, keep_order=args.keep_order,
                       test_size=args.test_size)
        _print(describe(path))
    elif args.command == "preview":
        from .preview import preview
        sources = args.sources[0] if len(args.sources) == 1 else args.sources
        _print(preview(sources, args.output, split=args.split, count=args.count, scale=args.scale,
                      force=args.force, keys=dict(args.keys) if args.keys else None,
                      resize=args.resize, max_memory=args.max_memory, augment=args.augment,
                      augmented=args.augmented, epoch=args.epoch, report=_print,
                      lossy=args.lossy, valid_size=args.valid_size, valid_seed=args.seed,
                      keep_order=args.keep_order, test_size=args.test_size).describe())
    elif args.command == "info":
        described = []  # (a blank line between two files' descriptions)

        def info(file, _):
            text = describe(file)
            _print("\n" * bool(described) + text)
            described.append(file)
        return _each_file(args.files, info)
    elif args.command == "budget":
        from .memory.budget import budget_report
        _print(budget_report(args.dataset, args.model, args.batch_size, args.device_memory,
                            args.margin, args.devices, args.dtype, args.mode))
    elif args.command == "manifest":
        import json
        from .store.reader import open_store
        _print(json.dumps(open_store(args.file, verify=False).manifest, indent=1, sort_keys=True))
    else:
        return _each_file(args.files, lambda file, _: _verify(file, args.strong))


def _verify(file, strong):
    """Check every checksum of the store ``file``, and say so in a line."""
    import time
    from .store.checksums import CHECKSUM_NAMES
    from .store.reader import open_store
    started = time.perf_counter()
    store = open_store(file, verify=False)
    checked = store.verify(strong=strong)
    seconds = time.perf_counter() - started
    datasets = [name for name in checked if "/" in name]
    size = os.path.getsize(file)
    _print(f"{file}: OK: the manifest, the HDF5 metadata and all {len(datasets)} "
          f"datasets match their checksums (every byte of the file was checked: "
          f"{size:,} bytes in {seconds:.2f} s, {_rate(size / max(seconds, 1e-9))}, "
          f"{CHECKSUM_NAMES[store.chunk_checksum]} per chunk"
          f"{', BLAKE3 per split' if strong else ''})")


def _rate(per_second):
    """``"1.23 GB/s"``, or in MB/s below 1 GB/s (a small store's "0.00 GB/s" said nothing)."""
    return f"{per_second / 1e9:.2f} GB/s" if per_second >= 1e9 else f"{per_second / 1e6:.1f} MB/s"


def _what_was_written(args):
    from .store.atomic import was_published

    output = getattr(args, "output", None)
    if output and was_published(output):
        return f"{output} had already been written, complete"
    if output and os.path.isfile(output):  # (--force: the one it was to replace)
        return f"nothing was written; {output} is as it was"
    return "nothing was written"


def _fail(message):
    _say(f"error: {message}")
    return 2


def _say(line):
    """One line on stderr, whatever the bytes of the file names in it."""
    print(_escaped(" ".join(line.split("\n")), sys.stderr), file=sys.stderr)


def describe(path):
    """The text ``int8store info`` prints."""
    from .store.reader import open_store

    store = open_store(path, verify=False)
    # (the store's words, escaped and shortened: a store from elsewhere may
    # hold a terminal's escape sequences, or a name of a page)
    p = {key: shortened(str(value), 1000) for key, value in store.provenance.items()}
    names = [shortened(name, 60) for name in store.label_names or []]
    lines = [
        f"{store.path}: int8store format {p['format_version']}, written by {p['writer']} on {p['created']}",
        f"source:       {p['source']}",
        f"command line: {p['command_line']}",
        f"encoding:     {store.encoding.describe()}",
        f"images:       {'x'.join(map(str, store.image_shape))} (axes: {', '.join(store.axes)})",
    ]
    if names:
        shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
        lines.append(f"labels:       {len(names)} class{'es' if len(names) != 1 else ''}: {shown}")
    if store.order is not None:
        from .plan.arrangement import describe_cuts, describe_order
        lines.append(f"order:        {describe_order(store.order)}")
        cuts = describe_cuts(store.order)
        if cuts:  # (a line of its own: the two were 186 characters)
            lines.append(f"splits:       {cuts}")
    pixels = int(__import__("numpy").prod(store.image_shape))
    rows = [("split", "examples", "int8 bytes", "float32 bytes", "code mean")]
    for name, count in store.splits.items():
        rows.append((name, f"{count:,}", f"{count * pixels:,}", f"{4 * count * pixels:,}",
                     "-" if store.code_means[name] is None else f"{store.code_means[name]:.4f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
              for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
