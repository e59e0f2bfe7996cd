"""mnist.pkl.gz read with a restricted unpickler.

Plain ``pickle.load`` runs whatever a file asks for. This unpickler rebuilds
numpy arrays, dtypes, tuples and lists, and refuses any other global, naming
it. Python 2 pickles (the classic file) are read with the latin-1 encoding.
A reader that knows which opcodes its pickles use passes them
(:data:`PROTOCOL_2_DATA`: CIFAR-10's batches), and any other opcode is
refused, named; reads are bounded by what the file can hold
(:class:`BoundedReader`).
"""

import os
import pickle
import pickletools
import re
import struct

import numpy as np

from ..errors import (SizeLimitError, SourceFormatError, UnsafePickleError, quoted,
                      shortened)
from ..codes.precoded import Precoded
from ..runtime.limits import AnnouncedBytes
from . import SourceData, Split
from .py2pickle import NDARRAY, check_state
from ._files import is_gzipped, open_maybe_gzipped

__all__ = ["restricted_load", "read_mnist_pickle", "BoundedReader", "PROTOCOL_2_DATA"]

_SPLITS = ("train", "valid", "test")


def _reconstruct(subtype, shape, dtype):
    # numpy pickles every array as _reconstruct(ndarray, (0,), b"b"), then sets
    # its shape and data: an empty start means an array never given data stays
    # empty, instead of holding whatever memory it was allocated.
    if subtype is not NDARRAY:
        raise pickle.UnpicklingError(f"only plain numpy arrays may be rebuilt, not {subtype!r}")
    if shape != (0,):
        raise pickle.UnpicklingError(f"an array is rebuilt with shape {shape!r}, not numpy's (0,)")
    return np.ndarray.__new__(np.ndarray, (0,), _dtype(dtype))


def _dtype(spec, align=False, copy=False):
    # Python 2 pickles pass the flags as 0 and 1, which numpy 2.4 deprecates.
    dtype = np.dtype(spec, bool(align), bool(copy))
    if dtype.hasobject:
        raise pickle.UnpicklingError("arrays of Python objects are not allowed")
    return dtype


def _frombuffer(buffer, dtype, shape, order):
    return np.frombuffer(buffer, dtype=_dtype(dtype)).reshape(shape, order=order)


def _latin1_bytes(text, encoding="latin1"):
    # Python 3 writes bytes into protocol-2 pickles as _codecs.encode(str, "latin1").
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is allowed only to rebuild latin-1 bytes")
    return text.encode("latin1")


def _no_bytes(*args):
    # ... and empty bytes (an empty array's data) as bytes(), with no argument.
    if args:
        raise pickle.UnpicklingError("bytes() is allowed only without arguments (empty bytes)")
    return b""


# (module, name) -> the callable given to the pickle instead. Old and new
# numpy module paths both appear in the wild.
_ALLOWED = {
    ("numpy", "ndarray"): NDARRAY,  # an argument of _reconstruct only: not callable
    ("numpy", "dtype"): _dtype,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("_codecs", "encode"): _latin1_bytes,
    ("__builtin__", "bytes"): _no_bytes,
    ("builtins", "bytes"): _no_bytes,
}


# Python's pure unpickler, not the C one: the C unpickler sizes its memo by
# the largest index a pickle names (LONG_BINPUT 2**30 allocates gigabytes),
# while this one keeps a dict.
class _RestrictedUnpickler(pickle._Unpickler):
    #: What the file's pickles may hold, for the refusal of anything else.
    holds = "numpy arrays, dtypes, tuples and lists"

    def __init__(self, file, **options):
        super().__init__(file, **options)
        self._will_read = getattr(file, "will_read", None)  # a BoundedReader's

    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"the pickle asks for {shortened(module, 80)}.{shortened(name, 80)}, which is not "
                f"allowed: only {self.holds} are rebuilt") from None

    def load_build(self):
        try:
            check_state(self.stack[-2], self.stack[-1])
        except (ValueError, IndexError) as error:
            raise pickle.UnpicklingError(str(error)) from None
        super().load_build()

    def load_bytearray8(self):
        # Python's unpickler allocates the length a BYTEARRAY8 announces (a
        # writable array's bytes, protocol 5) before reading it: hold the
        # length to what is left to read first.
        size, = struct.unpack("<Q", self.read(8))
        frame = self._unframer.current_frame
        if frame is not None:
            if size > frame.getbuffer().nbytes - frame.tell():
                raise pickle.UnpicklingError("pickle exhausted before end of frame")
        elif self._will_read is not None:
            self._will_read(size)
        data = bytearray(size)
        if self.readinto(data) != size:
            raise EOFError
        self.append(data)

    # Items are set in dicts only: Python's unpickler sets them in whatever
    # is below them, and an array's __setitem__ wrote into its data (numpy 2
    # raised OverflowError for a value beyond its dtype).
    def load_setitem(self):
        value, key = self.stack.pop(), self.stack.pop()
        _dict_below(self.stack)[key] = value

    def load_setitems(self):
        items = self.pop_mark()
        target = _dict_below(self.stack)
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.BUILD[0]] = load_build
    dispatch[pickle.SETITEM[0]] = load_setitem
    dispatch[pickle.SETITEMS[0]] = load_setitems
    dispatch[pickle.BYTEARRAY8[0]] = load_bytearray8

    def persistent_load(self, pid):
        raise UnsafePickleError("the pickle uses persistent ids, which are not allowed")


def _dict_below(stack):
    if not stack or type(stack[-1]) is not dict:
        raise pickle.UnpicklingError(
            f"items set in a {type(stack[-1]).__name__ if stack else 'missing object'}, "
            "not a dict")
    return stack[-1]


#: The opcodes of protocol 2 that a pickle of dicts, lists, tuples, small
#: ints, strings and numpy arrays uses, as Python 2's cPickle wrote them
#: (byte strings: SHORT_BINSTRING, BINSTRING) and as Python 3 writes them
#: (text: BINUNICODE; bytes through ``_codecs.encode``).
PROTOCOL_2_DATA = frozenset({
    "PROTO", "STOP", "MARK", "EMPTY_DICT", "SETITEM", "SETITEMS", "EMPTY_LIST", "APPEND",
    "APPENDS", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "BINPUT", "LONG_BINPUT",
    "BINGET", "LONG_BINGET", "GLOBAL", "REDUCE", "BUILD", "BININT", "BININT1", "BININT2", "NONE",
    "NEWTRUE", "NEWFALSE", "SHORT_BINSTRING", "BINSTRING", "BINUNICODE",
})
_OPCODE_NAMES = {ord(op.code): op.name for op in pickletools.opcodes}


def _refusal(code, newest):
    """What an opcode not allowed does: refuse, saying why (``newest``: the
    newest protocol of the opcodes allowed)."""
    name = _OPCODE_NAMES.get(code)
    what = f"the opcode {name}" if name else f"the byte 0x{code:02x}, which is no pickle opcode,"

    def refuse(self):
        declared = getattr(self, "proto", 0)  # (PROTO's, where the pickle starts with one)
        if declared > newest:  # (pickled again, by a newer Python: not damaged)
            raise UnsafePickleError(
                f"the pickle is of protocol {declared} ({what}), where this file's kind of "
                f"pickle is of protocol {newest} at most: was it pickled again? give int8store "
                "the file as published")
        raise UnsafePickleError(f"the pickle uses {what} where this file's kind of pickle has "
                                "none: it is damaged or not what it claims to be")
    return refuse


def _unpickler_of(opcodes, holds):
    """The restricted unpickler, allowed only ``opcodes`` (names) if given;
    ``holds`` says what the file's pickles may hold, if given."""
    if opcodes is None and holds is None:
        return _RestrictedUnpickler
    namespace = {"holds": holds or _RestrictedUnpickler.holds}
    if opcodes is not None:
        newest = max(op.proto for op in pickletools.opcodes if op.name in opcodes)
        namespace["dispatch"] = {
            code: (_RestrictedUnpickler.dispatch[code] if _OPCODE_NAMES.get(code) in opcodes
                   else _refusal(code, newest)) for code in range(256)}
    return type("_OpcodeRestrictedUnpickler", (_RestrictedUnpickler,), namespace)


def restricted_load(file, origin="pickle", opcodes=None, holds=None):
    """Unpickle numpy arrays/tuples/lists from a binary file object, nothing
    else (and only the pickle ``opcodes`` named, if given: see
    :data:`PROTOCOL_2_DATA`). ``holds``: what the file's pickles may hold,
    as a refusal names it (by default numpy arrays, dtypes, tuples and
    lists: MNIST's)."""
    try:
        return _unpickler_of(opcodes, holds)(file, encoding="latin1").load()
    except UnsafePickleError as error:
        raise UnsafePickleError(f"{origin}: {error}") from None
    except SourceFormatError:
        raise
    except EOFError as error:
        raise SourceFormatError(
            f"{origin}: the file is truncated: it ends in the middle of the data"
        ) from error
    except (pickle.UnpicklingError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            struct.error, SystemError, OverflowError) as error:
        # SystemError: numpy on some damaged array states
        raise SourceFormatError(f"{origin}: not a valid pickle of numpy arrays "
                                f"({_described(error)})") from error
    except MemoryError as error:
        raise SizeLimitError(f"{origin}: the pickle announces more data than fits in memory") from error


class BoundedReader:
    """A file object refusing reads beyond what the file can hold (see
    :mod:`int8store.runtime.limits`): the unpickler allocates what a length field
    announces before reading it. ``stored``: the bytes of the file (or
    archive member) ``origin``, ``compressed`` or not."""

    def __init__(self, file, origin, stored, compressed=False):
        self._file = file
        self._asked = AnnouncedBytes("the pickle", origin, stored, compressed)

    def read(self, n=-1):
        if n is None or n < 0:
            return self._bounded(self._file.read, -1)
        if self._read_whole():
            return b""
        self._asked.add(n)
        return self._file.read(n)

    def readinto(self, buffer):
        if self._read_whole():
            return 0
        self._asked.add(len(memoryview(buffer)))
        return self._file.readinto(buffer)

    def readline(self, limit=-1):
        return self._bounded(self._file.readline, limit)

    def will_read(self, nbytes):
        """Refuse ``nbytes`` that the pickle announces, before they are
        allocated, if the file cannot hold them (the read then counts them)."""
        if not self._read_whole():
            self._asked.check(nbytes)

    def _bounded(self, read, limit):
        """``read(n)`` for a read whose length the file decides (a line, the
        rest; at most ``limit`` if not negative): at most one byte more than
        may still be announced, which is then refused."""
        if self._read_whole():
            return b""
        room = self._asked.room() + 1
        data = read(room if limit is None or limit < 0 else min(limit, room))
        self._asked.add(len(data))
        return data

    def _read_whole(self):
        """Whether a file stored as it is was read to its end: a read then
        finds the end, as the file's own would (the pickle is cut short)."""
        return not self._asked.compressed and self._asked.total >= self._asked.stored


def read_mnist_pickle(path):
    """The classic ``((train_x, train_y), (valid_x, valid_y), (test_x, test_y))``.

    The classic file (a Python 2 pickle) is read by :mod:`.py2pickle`, which
    reads the images straight into their arrays; any other pickle by the
    restricted unpickler.
    """
    try:
        content = _read_python2_arrays(path)
        if content is None:
            with open_maybe_gzipped(path) as f:
                content = restricted_load(BoundedReader(f, path, os.path.getsize(path),
                                                        is_gzipped(path)), origin=str(path))
    except SizeLimitError:
        raise
    except SourceFormatError as error:  # (read as opcodes, text gave "KeyError 101")
        start = _text_start(path)
        if start is None:
            raise
        raise SourceFormatError(
            f"{path}: holds text, not a pickle (it starts {start!r}): expected the pickled "
            "(images, labels) pairs of train, valid and test, as mnist.pkl.gz holds them") \
            from error
    if not (isinstance(content, (tuple, list)) and len(content) == 3
            and all(isinstance(s, (tuple, list)) and len(s) == 2 for s in content)):
        raise SourceFormatError(
            f"{path}: expected three (images, labels) pairs (train, valid, test), "
            f"got {_shape_of(content)}"
        )
    for name, pair in zip(_SPLITS, content):
        for role, array in zip(("images", "labels"), pair):
            # A list would be made into an array here: a few bytes of pickle can
            # repeat one array a million times.
            if not isinstance(array, (np.ndarray, Precoded)):
                raise SourceFormatError(f"{path}: the {name} {role} are a "
                                        f"{type(array).__name__}, expected a numpy array")
    splits = {name: Split.from_arrays(name, images, _decoded(labels), str(path))
              for name, (images, labels) in zip(_SPLITS, content)}
    # The classic file holds flat 28x28 images.
    image_shape = (28, 28) if splits["train"].image_shape == (784,) else None
    return SourceData(splits, origin=str(path), image_shape=image_shape, keeps_order=True)


#: The bytes read to tell text from a protocol-0 pickle (a global's module
#: and name lines).
_GLOBAL_LINES = 512


def _text_start(path, length=24):
    """The first characters of the file (gunzipped), if it starts as text and
    not as a pickle of protocol 0 could (a tuple, a global: ``cposix`` then
    ``system`` is a pickle asking for os.system, refused as that)."""
    try:
        with open_maybe_gzipped(path) as f:
            start = f.read(_GLOBAL_LINES)
    except (OSError, SourceFormatError):
        return None
    text = bytes(range(0x20, 0x7f)) + b"\t\n\r"
    if not start or start.translate(None, text) or start.startswith(b"(") \
            or re.match(rb"c[A-Za-z_][\w.]*\n[A-Za-z_]\w*\n", start):
        return None
    return start[:length].decode("ascii").split("\n")[0]


def _decoded(array):
    """Labels as the pickle held them (float labels were encoded as read)."""
    return array.decoded() if isinstance(array, Precoded) else array


def _read_python2_arrays(path):
    """The content by :func:`.py2pickle.read_arrays`, or None if it does not apply."""
    from .py2pickle import Unsupported, read_arrays

    try:
        with open_maybe_gzipped(path) as f:
            return read_arrays(f, str(path), os.path.getsize(path), is_gzipped(path))
    except Unsupported:
        return None
    except SourceFormatError:
        raise
    except EOFError as error:
        raise SourceFormatError(str(error)) from error
    except (struct.error, KeyError, IndexError, TypeError, ValueError, AttributeError,
            SystemError, OverflowError) as error:  # SystemError: numpy on damaged array states
        raise SourceFormatError(f"{path}: not a valid pickle of numpy arrays "
                                f"({_described(error)})") from error


def _described(error):
    """An unpickling error in words: a KeyError's own text is only the key
    ("(101)", a memo slot the bytes name but never filled)."""
    if isinstance(error, (KeyError, IndexError)):
        return f"{type(error).__name__} {quoted(error)}"
    return quoted(error)


def _shape_of(content):
    if isinstance(content, (tuple, list)):
        return f"a {type(content).__name__} of {len(content)} items"
    return type(content).__name__
