"""``load_data()``: the classic tutorials' function, returning int8-backed splits."""

import numpy as np

from .dataset import SharedDataset
from .symbolic import normalization_mean
from .encoding import choose_encoding, encode
from .errors import ArgumentError, SourceFormatError
from .labels import as_int32_labels
from .sources import read_source, validation_count

__all__ = ["load_data", "load_splits", "SPLITS"]

SPLITS = ("train", "valid", "test")

# Without a validation split, this share of train becomes one: MNIST's 60,000
# training images split 50,000/10,000 as in the classic mnist.pkl.gz.
_VALID_SHARE = 6


def load_splits(dataset, normalize="unit", storage="int8", valid_size=None, cache_dir=None,
                lossy=False, mode="c"):
    """The train, valid and test splits of ``dataset`` as :class:`SharedDataset` objects.

    Parameters are those of :func:`load_data`.

    Returns
    -------
    dict
        ``{"train": SharedDataset, "valid": ..., "test": ...}``
    """
    source = read_source(dataset, cache_dir=cache_dir)
    splits = _with_validation_split(source, valid_size)
    names = {name: f"{source.origin} ({name})" for name in SPLITS}
    images = {n: splits[n].images() for n in SPLITS}
    encoding = source.encoding  # set when the images are already int8 codes (a store)
    if encoding is None:
        encoding = choose_encoding([images[n] for n in SPLITS], divisor=source.divisor,
                                   lossy=lossy, names=[f"{names[n]} images" for n in SPLITS])
        codes = {n: encode(images[n], encoding, name=f"{names[n]} images") for n in SPLITS}
    else:
        codes = images
    labels = {n: as_int32_labels(splits[n].labels, name=f"{names[n]} labels") for n in SPLITS}
    # "dataset" normalization uses the training split's statistics everywhere.
    mean = normalization_mean(codes["train"], encoding) if normalize == "dataset" else None
    return {
        n: SharedDataset(codes[n], labels[n], encoding, normalize=normalize, storage=storage,
                         dataset_mean=mean, image_shape=source.image_shape, name=n, mode=mode)
        for n in SPLITS
    }


def load_data(dataset, normalize="unit", storage="int8", valid_size=None, cache_dir=None,
              lossy=False, mode="c"):
    """Load a dataset as ``[(train_x, train_y), (valid_x, valid_y), (test_x, test_y)]``.

    The drop-in for the classic tutorials' ``load_data``: each ``x`` is a
    symbolic float32 view of int8 images held in a shared variable (slicing it
    slices the int8 data first), each ``y`` an int32 shared variable, so
    ``y.get_value(borrow=True).shape[0]`` counts the examples.

    Parameters
    ----------
    dataset : str or path
        ``"digits"`` (scikit-learn's 8x8 digits, offline), ``"mnist"`` (the
        cache folder, downloaded if missing), a path to ``mnist.pkl.gz``, a
        folder with the four MNIST IDX files (gzipped or not), or an ``.npz``.
    normalize : {"unit", "batch", "dataset", "none"}
        See :func:`~int8store.dequantize`; ``"unit"`` gives the classic values.
    storage : {"int8", "float32"}
        ``"float32"`` is the classic way, kept for comparison.
    valid_size : int or float, optional
        If the source has no validation split, how many training examples
        (or which fraction) become one, taken from the end. Default: a sixth
        (MNIST's 60,000 → 50,000/10,000, as the classic mnist.pkl.gz).
    cache_dir : path, optional
        Where ``"mnist"`` is cached (default ``$INT8STORE_DATA``, else
        ``~/.cache/int8store``).
    lossy : bool
        Quantize data that int8 cannot hold exactly instead of refusing it.
    mode : {"c", "jax"}
        Where the data is held: host memory for Aesara's C backend, or JAX's
        default device (a GPU when JAX sees one), placed once; compile with
        ``aesara.function(..., mode=int8store.function_mode(mode))``.

    Examples
    --------
    >>> (train_x, train_y), valid, test = load_data("digits")
    >>> train_y.get_value(borrow=True).shape[0]
    1197
    >>> train_x.dataset.data.get_value(borrow=True).dtype
    dtype('int8')
    """
    splits = load_splits(dataset, normalize=normalize, storage=storage, valid_size=valid_size,
                         cache_dir=cache_dir, lossy=lossy, mode=mode)
    return [(splits[n].x, splits[n].y) for n in SPLITS]


def _with_validation_split(source, valid_size):
    splits = dict(source.splits)
    if "train" not in splits or "test" not in splits:
        raise SourceFormatError(
            f"{source.origin}: has splits {sorted(splits)}; need at least train and test"
        )
    if "valid" in splits:
        if valid_size is not None:
            raise ArgumentError(
                f"{source.origin} already has a validation split; valid_size applies only "
                "to sources without one"
            )
        return splits
    train = splits["train"]
    count = train.count // _VALID_SHARE if valid_size is None else validation_count(
        valid_size, train.count)
    keep = np.arange(train.count) < train.count - count
    splits["train"], splits["valid"] = train.take("train", keep), train.take("valid", ~keep)
    return splits
