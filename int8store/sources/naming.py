"""What a dataset's class numbers stand for, where its classes are named:
:func:`class_names` (a store's manifest records the names, class folders
are named so). A module apart from :mod:`.locate`: the readers import
that one, and this one reads through them."""

from . import _kind, read_source
from .locate import caller_file, find_store

__all__ = ["class_names", "shown_names"]


def class_names(dataset, caller=None):
    """What ``dataset``'s class numbers stand for, where its classes have
    names other than their numbers (class folders ``cat``, ``dog``; folders
    ``2``, ``10``, ``7``, numbered in name order ``10``, ``2``, ``7``): a
    store's, from its manifest, or class folders', listed (their first
    image alone decoded); None for any other source."""
    from ..store.reader import open_store

    caller = caller or caller_file()
    store = find_store(dataset, caller)
    if store is not None:
        names = open_store(store, verify=False).label_names
    elif _kind(dataset, caller)[0] in ("image folder", "image archive"):
        names = read_source(dataset, caller=caller).label_names
    else:
        return None
    return shown_names(names)


def shown_names(names):
    """``names`` (name ``i`` for label ``i``), or None where they say no more
    than the numbers (folders ``0`` to ``9``) or there are none.

    >>> shown_names(["0", "1"]), shown_names(["10", "2"])
    (None, ['10', '2'])
    """
    return None if names is None or list(names) == [str(i) for i in range(len(names))] \
        else list(names)
