"""A model's parameters set from a saved ``.npz``: each array found by its
key, the shape and dtype its header announces checked against the
parameter's before any array is read, and none set before all are read, so
that a file that does not fit the model changes nothing and allocates no
more than the model's own size.

A run's checkpoint (:mod:`.run`) holds its parameters in the model's dtype
exactly; a best model saved with :func:`~int8store.training.save_checkpoint` may be
read with any floating dtype, cast to the model's (a model saved under
``floatX=float64`` predicts under float32); what it records beside them
(:func:`saved_model_description`) is read too: the names of its classes,
checked against the data's, by :func:`saved_class_names`.
"""

import numpy as np

from ..errors import ArgumentError, SourceFormatError, shortened
from ..runtime.npz import describe_array
from ..runtime.words import listed
from ..sources.naming import shown_names
from ..store.checkpoint import (MODEL_DESCRIPTION, RUN_DESCRIPTION, open_checkpoint,
                                read_description)

__all__ = ["load_parameters", "open_saved_model", "read_parameters", "parameter_label",
           "saved_model_description", "saved_class_names"]


def parameter_label(index, param):
    """``parameter 0 W``: how messages name a model's parameter."""
    return f"parameter {index} {param.name}" if param.name else f"parameter {index}"


def read_parameters(archive, params, keys, held_by, cast=False, labels=None):
    """The arrays of ``archive`` (an :class:`~int8store.runtime.npz.NpzArchive`)
    at ``keys``, one for each of ``params`` (shared variables), each in its
    parameter's dtype, read once every one is checked: present, with the
    parameter's shape and dtype (or, with ``cast``, any floating dtype for a
    floating parameter). ``held_by`` names the file in messages
    (``"checkpoint"``, ``"saved"``), ``labels`` each parameter (by default
    :func:`parameter_label`).

    Raises :class:`~int8store.ArgumentError` naming the file and the
    parameter: ``FILE: parameter 0 W: checkpoint (3, 3) int8, model (64, 10)
    float64``.
    """
    labels = labels or [parameter_label(i, p) for i, p in enumerate(params)]
    members = []
    for param, key, label in zip(params, keys, labels):
        if key not in archive:
            others = ", ".join(shortened(name) for name in archive.others)
            raise ArgumentError(
                f"{archive.path}: holds no {key}, the model's {label} (its arrays: "
                f"{', '.join(archive.keys()) or 'none'}"
                + (f"; members that are not arrays: {others}): damaged, or not this model's"
                   if others else "): not this model's"))
        member = archive[key]
        shape = tuple(np.shape(param.get_value(borrow=True)))
        dtype = np.dtype(param.dtype)
        fits = member.dtype == dtype or (cast and member.dtype.kind == dtype.kind == "f")
        if member.shape != shape or not fits:
            raise ArgumentError(f"{archive.path}: {label}: {held_by} {member.describe()}, "
                                f"model {describe_array(shape, dtype)}: not this model's")
        members.append(member)
    return [member.read().astype(param.dtype, copy=False)
            for member, param in zip(members, params)]


def open_saved_model(path, keys=None):
    """The saved model at ``path`` (``.npz`` added without it) as an
    :class:`~int8store.runtime.npz.NpzArchive`, its headers read: refused
    when there is none, when it cannot be read, and when it is a run's
    checkpoint, which holds its parameters under other names (unless
    ``keys`` name the arrays to read)."""
    archive = open_checkpoint(path, "saved model")
    if RUN_DESCRIPTION in archive and keys is None:
        raise ArgumentError(f"{archive.path}: not a saved model (a run's checkpoint: --checkpoint "
                            "writes those; --save-model writes the best model's parameters, "
                            "which --predict reads)")
    return archive


#: The most bytes a saved model's description may take (a few words, and
#: its class names: tens of thousands of them).
_MOST_DESCRIPTION_BYTES = 1 << 22


def saved_model_description(archive):
    """What the saved model ``archive`` (:func:`open_saved_model`'s) was
    trained on, as a run's ``save_model`` records it (``{"normalize":
    ..., "program": ..., "class_names": [...]}``, the names where the data
    had them), or ``{}`` for a model saved without it (by int8store 0.3.1
    and before, or by a user's own ``save_checkpoint``)."""
    if MODEL_DESCRIPTION not in archive:
        return {}
    description = read_description(archive, MODEL_DESCRIPTION, _MOST_DESCRIPTION_BYTES)
    if not isinstance(description, dict) or not isinstance(description.get("normalize"), str):
        raise SourceFormatError(f"{archive.path}: its description holds no normalization")
    names = description.get("class_names")
    if names is not None and not (isinstance(names, list)
                                  and all(isinstance(name, str) for name in names)):
        raise SourceFormatError(f"{archive.path}: its description's class_names are not a "
                                "list of names: damaged")
    return description


def saved_class_names(path, data_names, origin):
    """What the class numbers of the saved model at ``path`` stand for, to
    print beside its predictions (None where they say no more than the
    numbers, :func:`~int8store.sources.naming.shown_names`): the names it
    records (:meth:`~int8store.training.Run.save_model`), which the data's
    ``data_names`` (its splits' ``label_names``; None for data without
    names) must be. A model saved without them (by int8store 0.3.1 and
    before, or a user's own code) takes the data's, as it did.

    Raises :class:`~int8store.ArgumentError` where the data ``origin``
    names its classes otherwise (other names, another count, another
    order: a class folder renamed moves the others' numbers): its labels
    would not be the model's classes, and every name printed would be
    another class's.
    """
    archive = open_saved_model(path)
    recorded = saved_model_description(archive).get("class_names")
    if recorded is None:
        return shown_names(data_names)
    data_names = None if data_names is None else list(data_names)
    if data_names is not None and data_names != recorded:
        raise ArgumentError(
            f"{archive.path}: a model of the classes {_listed(recorded)}, and {origin} names its "
            f"classes {_listed(data_names)} ({_first_difference(recorded, data_names)}): its "
            "label numbers would not stand for the model's classes; give data whose classes are "
            "named as the model's (class folders under the names they had in training)")
    return shown_names(recorded)


def _listed(names):
    """``['cat', 'dog']``; the first ten of more, and how many more."""
    return f"[{listed(repr(shortened(name, 60)) for name in names)}]"


def _first_difference(model, data):
    """Where two lists of class names part, in words."""
    if len(model) != len(data):
        return f"{len(model):,} classes in the model, {len(data):,} in the data"
    index = next(i for i, (a, b) in enumerate(zip(model, data)) if a != b)
    return (f"class {index}: {shortened(model[index], 60)!r} in the model, "
            f"{shortened(data[index], 60)!r} in the data")


def load_parameters(path, params, keys=None):
    """Set ``params`` (shared variables) to the arrays saved at ``path``
    (an ``.npz``, as :func:`~int8store.training.save_checkpoint` writes a best
    model: ``save_checkpoint(path, W=..., b=...)``), found by each
    parameter's name or by ``keys``, each checked against its parameter
    before any is read or set (:func:`read_parameters`; a floating array is
    cast to the parameter's dtype). ``.npz`` is added to a path without it,
    as :func:`~int8store.training.save_checkpoint` adds it. Returns the path.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from int8store.training import save_checkpoint
    >>> from int8store.backend import activate
    >>> w = activate().shared(np.zeros(3), name="w")
    >>> path = save_checkpoint(os.path.join(tempfile.mkdtemp(), "model"), w=np.arange(3.0))
    >>> _ = load_parameters(path, [w])
    >>> w.get_value().tolist()
    [0.0, 1.0, 2.0]
    """
    archive = open_saved_model(path, keys)
    path = archive.path
    params = list(params)
    if keys is None:
        unnamed = [parameter_label(i, p) for i, p in enumerate(params) if not p.name]
        if unnamed:
            raise ArgumentError(f"{path}: {', '.join(unnamed)} of the model has no name to find "
                                "its array by: name it (shared(..., name='W')) or give keys=")
        keys = [p.name for p in params]
    # Cast, where a run's checkpoint is refused: a saved model only predicts,
    # and float32 values are exact in float64 (float64 ones rounded to float32
    # are what a float32 run computes with anyway); a resumed run must go on
    # bitwise as the one stopped would have, in the dtype it trained in.
    values = read_parameters(archive, params, keys, "saved", cast=True)
    for param, value in zip(params, values):
        param.set_value(value)
    return path
