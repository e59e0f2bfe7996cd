"""The classic mnist.pkl.gz read without a second copy of its images.

The file is a Python 2 pickle (protocol 2) of numpy arrays, each stored as a
string of raw bytes. Python's unpickler reads such a string into a buffer,
then copies it into a new object: twice the images' bytes at once (313.6 MB
for MNIST's training images). This reader interprets the same opcodes, but
when a large string turns out to be an array's data it allocates the array
and reads the data straight into it, a megabyte at a time.

A large float array is read a block at a time and encoded as it comes
(:func:`~int8store.codes.precoded.read_encoded`): it is given back as a
:class:`~int8store.codes.precoded.Precoded` (its int8 codes) where an
encoding holds it, and the floats are never all in memory.

It understands the opcodes that numpy arrays, tuples and lists of protocol 2
use and rebuilds numpy arrays and dtypes only; anything else raises
:class:`Unsupported`, and the caller falls back on the restricted unpickler
(:mod:`.pickled`), which reads every pickle it accepts.
"""

import math
import struct

import numpy as np

from ..codes.precoded import DataEnded, read_encoded, read_into
from ..runtime.limits import AnnouncedBytes

__all__ = ["read_arrays", "Unsupported"]

# Strings at least this long that are an array's data are read into the array.
_STREAMED = 1 << 20
# The longest line read (a global's module or name: numpy's are short).
_MOST_LINE = 256


class Unsupported(Exception):
    """The pickle uses something this reader does not interpret."""


class _Pending:
    """An array under construction: numpy's ``_reconstruct`` result until BUILD
    gives it its shape and data (an array never built is refused, not handed
    over with whatever memory it was given)."""

    def __init__(self, dtype):
        self.array = np.empty(0, dtype)
        self.built = False


class _ReadInto:
    """A large string that was an array's data, already read into ``array``."""

    def __init__(self, array):
        self.array = array


class _NdarrayName:
    """``numpy.ndarray`` as a pickle names it, for the one use numpy makes of
    it: the first argument of ``_reconstruct``. Called, as in
    ``numpy.ndarray((N,), "u1")``, it would allocate an array without filling
    it (its bytes: whatever memory held): that is refused."""

    def __call__(self, *args, **kwargs):
        from ..errors import UnsafePickleError

        raise UnsafePickleError(
            "the pickle calls numpy.ndarray(...) directly, which makes an array of "
            "uninitialised memory: only arrays whose bytes come from the file are rebuilt")

    def __repr__(self):
        return "numpy.ndarray"


#: What both pickle readers give a pickle that asks for ``numpy.ndarray``.
NDARRAY = _NdarrayName()


def _reconstruct(subtype, shape, dtype):
    # numpy pickles every array as _reconstruct(ndarray, (0,), b"b") then BUILD.
    if subtype is not NDARRAY or shape != (0,):
        raise Unsupported(f"an array of type {subtype!r} and shape {shape!r}")
    return _Pending(_dtype(dtype))


def _dtype(spec, align=False, copy=False):
    dtype = np.dtype(spec, bool(align), bool(copy))  # numpy 2.4 wants booleans
    if dtype.hasobject:
        raise Unsupported("an array of Python objects")
    return dtype


_GLOBALS = {("numpy.core.multiarray", "_reconstruct"): _reconstruct,
            ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
            ("numpy", "ndarray"): NDARRAY, ("numpy", "dtype"): _dtype}


def read_arrays(file, origin, stored_bytes, compressed):
    """The object a protocol-2 pickle of arrays and tuples holds, read from the
    binary file object ``file`` (which must support ``readinto``).

    Every string's announced length is checked, before it is allocated,
    against what ``stored_bytes`` of file (``compressed`` or not) can hold
    and against the memory ceiling (:mod:`int8store.runtime.limits`)."""
    stack, marks, memo = [], [], {}
    announced = AnnouncedBytes("the pickle", origin, stored_bytes, compressed)

    def read(n):
        data = file.read(n)
        if len(data) != n:
            raise DataEnded(f"{origin}: the file is truncated: it ends in the middle of the data")
        return data

    def string(size):
        announced.add(size)
        if size >= _STREAMED and _is_array_state(stack, marks):
            return _ReadInto(_read_array(file, stack[-3], stack[-2], stack[-1], size, origin))
        return read(size).decode("latin1")

    def line():
        text = file.readline(_MOST_LINE)
        announced.add(len(text))
        if not text.endswith(b"\n"):
            raise Unsupported(f"a global named by a line of {_MOST_LINE} bytes or more")
        return text.decode("ascii").strip()

    def pop_mark():
        items = stack[marks[-1]:]
        del stack[marks.pop():]
        return items

    while True:
        op = read(1)
        if op == b"\x80":  # PROTO
            if read(1)[0] > 2:
                raise Unsupported("a pickle protocol above 2")
        elif op == b"c":  # GLOBAL
            module, name = line(), line()
            if (module, name) not in _GLOBALS:
                raise Unsupported(f"{module}.{name}")
            stack.append(_GLOBALS[(module, name)])
        elif op in (b"q", b"r"):  # BINPUT, LONG_BINPUT
            memo[read(1)[0] if op == b"q" else struct.unpack("<I", read(4))[0]] = stack[-1]
        elif op in (b"h", b"j"):  # BINGET, LONG_BINGET
            stack.append(memo[read(1)[0] if op == b"h" else struct.unpack("<I", read(4))[0]])
        elif op == b"(":  # MARK
            marks.append(len(stack))
        elif op == b"t":  # TUPLE
            stack.append(tuple(pop_mark()))
        elif op == b")":  # EMPTY_TUPLE
            stack.append(())
        elif op in (b"\x85", b"\x86", b"\x87"):  # TUPLE1..3
            n = op[0] - 0x84
            items = tuple(stack[-n:])
            del stack[-n:]
            stack.append(items)
        elif op == b"]":  # EMPTY_LIST
            stack.append([])
        elif op == b"e":  # APPENDS
            items = pop_mark()
            stack[-1].extend(items)
        elif op == b"a":  # APPEND
            item = stack.pop()
            stack[-1].append(item)
        elif op == b"J":  # BININT
            stack.append(struct.unpack("<i", read(4))[0])
        elif op == b"K":  # BININT1
            stack.append(read(1)[0])
        elif op == b"M":  # BININT2
            stack.append(struct.unpack("<H", read(2))[0])
        elif op == b"N":  # NONE
            stack.append(None)
        elif op in (b"\x88", b"\x89"):  # NEWTRUE, NEWFALSE
            stack.append(op == b"\x88")
        elif op == b"U":  # SHORT_BINSTRING
            stack.append(string(read(1)[0]))
        elif op == b"T":  # BINSTRING
            size = struct.unpack("<i", read(4))[0]
            if size < 0:
                raise Unsupported("a string of negative length")
            stack.append(string(size))
        elif op == b"R":  # REDUCE
            args = stack.pop()
            function = stack.pop()
            if function is NDARRAY or function not in _GLOBALS.values() \
                    or not isinstance(args, tuple):  # (the restricted unpickler names the call)
                raise Unsupported(f"a call of {function!r}")
            stack.append(function(*args))
        elif op == b"b":  # BUILD
            state = stack.pop()
            _build(stack[-1], state)
        elif op == b".":  # STOP
            return _resolved(stack.pop())
        else:
            raise Unsupported(f"the opcode {op!r}")


def _is_array_state(stack, marks):
    """Whether the stack holds ``MARK version shape dtype fortran`` of an array."""
    return (bool(marks) and len(stack) - marks[-1] == 4 and marks[-1] >= 1
            and isinstance(stack[marks[-1] - 1], _Pending) and isinstance(stack[-2], np.dtype)
            and isinstance(stack[-3], tuple) and isinstance(stack[-1], bool))


def _read_array(file, shape, dtype, fortran, size, origin):
    if not all(isinstance(n, int) and n >= 0 for n in shape):
        raise Unsupported(f"an array shape {shape!r}")
    expected = math.prod(shape) * dtype.itemsize
    if size != expected:
        raise Unsupported(f"{size} bytes of data for an array of shape {shape} and {dtype}")
    if dtype.kind == "f" and dtype.itemsize in (4, 8) and not fortran:
        # Float pixels encoded as they are read (a Precoded, or the floats
        # where no encoding holds them): never all the floats at once.
        return read_encoded(file.readinto, shape, dtype, origin)
    array = np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    read_into(file.readinto, array.reshape(-1, order="A"), origin)  # (a view: memory's order)
    return array


def check_state(obj, state):
    """Raise ValueError unless ``state`` is what numpy pickles for a plain
    numeric array or a numeric dtype: ``__setstate__`` trusts its argument,
    and odd states make dtypes and arrays that fail later in numpy itself (a
    datetime dtype given a number's state crashes the process)."""
    if isinstance(obj, np.dtype):
        if obj.kind not in "biuf":
            raise ValueError(f"a state for a {obj} dtype: only numbers' dtypes are rebuilt")
        if not (isinstance(state, tuple) and len(state) == 8 and state[0] == 3
                and state[1] in ("<", ">", "|", "=") and state[2:5] == (None, None, None)
                and state[5:] == (-1, -1, 0)):
            raise ValueError(f"a dtype state {state!r:.80} that numpy does not write for numbers")
    elif isinstance(obj, np.ndarray):
        if not (isinstance(state, tuple) and len(state) == 5 and state[0] == 1
                and isinstance(state[1], tuple)
                and all(isinstance(n, int) and n >= 0 for n in state[1])
                and isinstance(state[2], np.dtype) and state[2].kind in "biuf"
                and isinstance(state[3], bool) and isinstance(state[4], (bytes, str, _ReadInto))):
            raise ValueError(f"an array state {state!r:.80} that numpy does not write for numbers")
    else:
        raise ValueError(f"the state of {type(obj).__name__}")


def _build(obj, state):
    try:
        check_state(obj.array if isinstance(obj, _Pending) else obj, state)
    except ValueError as error:
        raise Unsupported(str(error)) from None
    if isinstance(obj, _Pending):
        if isinstance(state[-1], _ReadInto):
            obj.array = state[-1].array
        else:
            obj.array.__setstate__(state)
        obj.built = True
    else:
        obj.__setstate__(state)


#: The deepest nesting of tuples and lists resolved (MNIST's is 2).
_MOST_NESTING = 32


def _resolved(value, done=None, open_=None):
    """``value`` with each array under construction replaced by its array.
    Each container is resolved once (``done``, by id): the memo lets a few
    bytes name one list from many places, and resolving each reference anew
    grew exponentially (a 130-byte pickle of 22 nested pairs took 50 s and
    670 MB). A container that holds itself is refused (``open_``)."""
    done = {} if done is None else done
    open_ = set() if open_ is None else open_
    if isinstance(value, _Pending):
        if not value.built:
            raise Unsupported("an array without its data")
        return value.array
    if isinstance(value, _ReadInto):
        raise Unsupported("array data outside an array")
    if not isinstance(value, (tuple, list)):
        return value
    key = id(value)
    if key in done:
        return done[key]
    if key in open_:
        raise Unsupported("a list or tuple that holds itself")
    if len(open_) >= _MOST_NESTING:
        raise Unsupported(f"lists or tuples nested more than {_MOST_NESTING} deep")
    open_.add(key)
    done[key] = type(value)(_resolved(v, done, open_) for v in value)
    open_.discard(key)
    return done[key]
