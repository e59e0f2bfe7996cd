"""The manifest's ``order`` (optional, format 3): how the planning step
ordered and cut the examples of the store when it was written.

``{"seed": S, "shuffled": [split, ...], "valid": cut, "test": cut}``:
``seed``, the seed of the draws (an integer from 0 to 2**32 - 1; null
when none was made); ``shuffled``, the splits whose order was drawn from it (a
source whose labels ran by class; empty when its order was kept); ``valid``
and ``test`` (each optional), how that split was made, one of
:data:`~int8store.codes.vocabulary.CUTS`. Checked before it is used; a
store written before the field has none, and a reader from before it
ignores it. Keys this reader does not know are left alone.
"""

from ..codes.vocabulary import CUTS
from ..errors import StoreFormatError
from .manifest import is_count, shown

__all__ = ["ORDER", "read_order"]

#: The manifest's field.
ORDER = "order"


def read_order(value, splits, path):
    """The manifest's ``order`` checked (None where it has none); ``splits``:
    the store's split names."""
    if value is None:
        return None
    where = f"{path}: the manifest's {ORDER!r}"
    if not isinstance(value, dict):
        raise StoreFormatError(f"{where} is {shown(value)}, where an object belongs")
    seed = value.get("seed")
    if seed is not None and not (is_count(seed) and seed < 1 << 32):
        raise StoreFormatError(f"{where} holds {shown(seed)} as its seed, where an integer "
                               "from 0 to 2**32 - 1 (or null) belongs")
    shuffled = value.get("shuffled", [])
    if not (isinstance(shuffled, list) and all(isinstance(n, str) and n in splits for n in shuffled)
            and len(set(shuffled)) == len(shuffled)):
        raise StoreFormatError(f"{where} holds {shown(shuffled)} as the splits shuffled, where a "
                               f"list of its splits ({', '.join(splits)}) belongs")
    if shuffled and seed is None:
        raise StoreFormatError(f"{where} lists shuffled splits without the seed that shuffled them")
    for split in ("valid", "test"):
        if split in value and value[split] not in CUTS:
            raise StoreFormatError(f"{where} holds {shown(value[split])} as how split {split!r} "
                                   f"was made, where one of {', '.join(CUTS)} belongs")
    return dict(value)
