"""One split of a dataset held as shared variables (PyTensor's or Aesara's): int8 images, int32 labels.

:class:`SharedDataset` is what the rest of the library works with;
:func:`shared_dataset` is the drop-in for the classic tutorials' function of
the same name and returns just its ``(x, y)``. Where the data is held (host
or device) is :func:`int8store.place`'s business, not this module's.
"""

import copy

import numpy as np

from ..augment.spec import Augmentation, fill_code, refuse_alternating_shuffled
from ..backend import activate
from ..backend.ops.augment import augmented
from ..backend.ops.gather import decode_recipe, gather_rows
from ..backend.ops.minibatch import minibatch
from ..backend.ops.shared_rows import shared_rows
from ..codes.channels import PER_CHANNEL, ChannelStatistics
from ..codes.histogram import channels_of
from ..codes.encoding import Encoding
from ..codes.survey import quantize
from ..errors import ArgumentError, shortened
from ..order.position import check_batch_size, check_epoch, check_start
from ..order.shuffle import check_seed
from ..store.checksums import split_digest
from ..codes.labels import as_int32_labels
from ..order.windows import split_in_a_row
from .split import Batch, Split
from .symbolic import dequantize, normalization_mean, per_batch_stage, per_pixel_stage
from .views import float_view, labels_view
from ..codes.vocabulary import STORAGES, check_choice

_api = activate()
at, shared = _api.at, _api.shared

__all__ = ["SharedDataset", "shared_dataset"]

_FLOAT32_BYTES = 4


class SharedDataset(Split):
    """Images and labels of one split, as shared variables, held whole (on
    one device, or in rows over several: :func:`int8store.place`).

    Parameters
    ----------
    codes : ndarray of int8, shape (N, ...)
        The encoded images; stored flattened to ``(N, D)`` as the tutorials
        expect, the original image shape kept in :attr:`image_shape`.
    labels : ndarray of int, shape (N,)
    encoding : Encoding
    normalize : {"unit", "batch", "dataset", "none"}
        The float view's normalization (see :func:`~int8store.dequantize`).
    storage : {"int8", "float"}
        ``"float"`` holds a float copy (in the view's dtype) made once, the
        classic way, so both can be compared with everything else the same.
    dataset_mean : float, optional
        For ``normalize="dataset"``: the training split's mean (default: this
        split's own).
    channel_statistics : ChannelStatistics, optional
        For ``normalize="channel"`` and ``"standard"``: the training split's
        per-channel mean and standard deviation (default: this split's own;
        images channels-last, the channels the last axis of ``image_shape``).
    image_shape : tuple, optional
        Shape of one image (default: ``codes.shape[1:]``).
    name : str
        The split's name, used for variable names and messages.
    dtype : {"float32", "float64"}, optional
        The view's dtype; default Aesara's ``floatX``.
    ordered : bool
        Read the rows through :attr:`order` (a streamed shard lent in the
        split's own order and trained on shuffled).

    Attributes
    ----------
    x : float tensor variable
        The symbolic view of all images. Indexing it (``x[a:b]``) slices the
        stored codes first and converts only the slice; ``x.get_value()``
        decodes them all (what the classic shared variable held).
    y : int32 shared variable
        The labels; ``y.get_value(borrow=True).shape[0]`` is the example count
        (over several devices too: ``get_value`` leaves the blocks' padding
        out, see :class:`~int8store.backend.ops.shared_rows.SharedRows`).
    data : shared variable
        The stored images: int8 codes, or floats for ``storage="float"``.
    order : int32 shared variable or None
        With ``ordered``: the rows in the order ``x``, :meth:`minibatch` and
        :meth:`decoded` take them (row ``i`` of the view is ``data[order[i]]``,
        label ``i`` is ``y[i]``), gathered and decoded in one pass in the step;
        the identity until it is set.

    Examples
    --------
    >>> import numpy as np
    >>> images = np.arange(24, dtype=np.uint8).reshape(6, 2, 2)
    >>> ds = SharedDataset.from_arrays(images, [0, 1, 0, 1, 0, 1], name="train", dtype="float32")
    >>> ds.n_examples, ds.n_batches(4), ds.image_shape
    (6, 1, (2, 2))
    >>> ds.nbytes, ds.float32_nbytes
    (24, 96)
    >>> ds.x.get_value()[1].tolist()
    [0.015625, 0.01953125, 0.0234375, 0.02734375]
    """

    def __init__(self, codes, labels, encoding, normalize="unit", storage="int8",
                 dataset_mean=None, image_shape=None, name="data", dtype=None, ordered=False,
                 channel_statistics=None):
        codes = np.asarray(codes)
        if codes.dtype != np.int8 or codes.ndim < 2:
            raise ArgumentError(
                f"{name}: codes must be an int8 array of shape (N, ...), "
                f"got {codes.dtype} of shape {codes.shape}"
            )
        if codes.shape[0] == 0:  # (numpy's reshape refused it, in its own words)
            raise ArgumentError(f"{name}: no examples (codes of shape {codes.shape}); a split "
                                "holds at least one")
        labels = as_int32_labels(labels, name=f"{name} labels")
        if labels.shape[0] != codes.shape[0]:
            raise ArgumentError(
                f"{name}: {codes.shape[0]} images but {labels.shape[0]} labels; "
                "every image needs exactly one label"
            )
        check_choice("storage", storage, STORAGES)
        if not isinstance(encoding, Encoding):
            raise ArgumentError(f"{name}: encoding={shortened(repr(encoding))}: expected an "
                                "int8store.Encoding (quantize gives the codes and theirs)")
        self.name = name
        self.encoding = encoding
        self.normalize = normalize
        self.storage = storage
        self.dtype = _api.float_dtype(dtype)
        self.image_shape = tuple(image_shape or codes.shape[1:])
        if int(np.prod(self.image_shape)) != int(np.prod(codes.shape[1:])):
            raise ArgumentError(
                f"{name}: image_shape {self.image_shape} does not match "
                f"{int(np.prod(codes.shape[1:]))} values per image"
            )
        flat = codes.reshape(codes.shape[0], -1)
        if normalize == "dataset" and dataset_mean is None:
            dataset_mean = normalization_mean(flat, encoding)
        self.dataset_mean = dataset_mean
        if normalize in PER_CHANNEL and channel_statistics is None:
            channel_statistics = ChannelStatistics.of(flat, encoding, channels_of(self.image_shape))
        self.channel_statistics = channel_statistics
        if storage == "int8":
            stored = flat
        else:
            stored = _evaluate(flat, encoding, normalize, dataset_mean, self.dtype,
                               channel_statistics)
        self.data = shared_rows(stored, name=f"{name}_x")
        self.y = shared_rows(labels, name=f"{name}_y")
        self._count = int(labels.shape[0])
        self._labels = labels  # on the host too: 4 bytes an example, read without a device
        #: How the rows lie over several devices (int8store.place(..., devices=N)), else None.
        self.blocks = None
        self.seed = None  # see shuffle()
        #: What augment() set: (Augmentation, seed), else None.
        self.augmentation = None
        # The epoch augmented minibatches are drawn for, and the number in the
        # epoch of index 0's minibatch (a streamed shard's first): augment().
        self._epoch = self._first_step = None
        self._digest = None  # what gives digest() when no process holds every row
        self.order = shared(np.arange(len(flat), dtype=np.int32), name=f"{name}_order") \
            if ordered else None
        # Through a full slice, so that the view is a variable of its own even
        # when no conversion is needed (float storage, unit scale).
        self.x = float_view(self._float_view(self.data[:]) if self.order is None
                            else self._rows_view(self.order), self)

    @classmethod
    def from_arrays(cls, images, labels, divisor=None, lossy=False, name="data", **kwargs):
        """Quantize ``images`` (see :func:`~int8store.quantize`) and hold them.

        ``images`` has shape ``(N, ...)``: flat vectors or 2-D/3-D images.
        """
        images = np.asarray(images)
        if images.ndim < 2:
            raise ArgumentError(
                f"{name}: images must have shape (N, ...), got shape {images.shape}"
            )
        codes, encoding = quantize(images, divisor=divisor, lossy=lossy, name=f"{name} images")
        return cls(codes, labels, encoding, name=name, **kwargs)

    def _float_view(self, stored):
        """Float expression for a part (slice) of the stored images."""
        if self.storage == "int8":
            if self.normalize in PER_CHANNEL and stored.type.shape[-1] is None:
                # (Aesara's slices forget the width the statistics repeat over)
                stored = at.specify_shape(stored, (None,) * (stored.ndim - 1) + (self.n_features,))
            return dequantize(stored, self.encoding, self.normalize, self.dataset_mean, self.dtype,
                              self.channel_statistics)
        return per_batch_stage(stored, self.encoding, self.normalize, self.dtype)

    def _rows_view(self, rows):
        """Float expression for the stored rows ``rows`` (an integer
        variable): gathered and decoded in one pass where that is exact."""
        if rows.ndim != 1 or self.storage != "int8":
            return self._float_view(self.data[rows])
        recipe = decode_recipe(self.encoding, self.normalize, self.dataset_mean, self.dtype)
        if recipe is None:
            return self._float_view(gather_rows(self.data, rows))
        return per_batch_stage(gather_rows(self.data, rows, recipe, self.dtype), self.encoding,
                               self.normalize, self.dtype)

    def rows(self):
        """The stored rows (int8 codes, or the float copy) in the order
        :attr:`x` shows them and :attr:`y` labels them: ``data`` taken by
        :attr:`order` when there is one, padding left out."""
        rows = np.asarray(self.data.get_value(borrow=True))
        if self.order is not None:
            rows = rows[self.order.get_value(borrow=True)]
        return rows[:self.n_examples]

    def digest(self):
        """BLAKE3 of the split's codes in order, then its labels: the digest
        a store records of it (:func:`int8store.store.checksums.split_digest`)."""
        if self._digest is not None:  # (placed from a store: the store's)
            return self._digest()
        return split_digest(self.rows(), self.labels)

    def keep_digest(self):
        """Compute :meth:`digest` now and keep it: once the rows are placed
        over several processes' devices, no process holds them all."""
        known = self.digest()
        self._digest = lambda: known

    def decoded(self):
        """All images as the view's values, a numpy array ``(N, features)``
        (for ``"batch"``, centred on the whole split's mean)."""
        codes = self.rows()
        if self.storage == "int8" and self.normalize == "unit":
            return self.encoding.decode(codes, self.dtype)  # a table lookup, no graph
        symbolic = at.TensorType(codes.dtype, shape=(None, codes.shape[1]))()
        return _api.function([symbolic], self._float_view(symbolic))(codes)

    # -- sizes ----------------------------------------------------------

    @property
    def labels(self):
        """The labels, int32 in host memory: ``y``'s value held on one device
        (``y.set_value`` changes them), a copy kept over several."""
        if self.blocks is None:
            return np.asarray(self.y.get_value(borrow=True))
        return self._labels

    def set_labels(self, labels):
        """Replace the labels (``y.set_value``): one an example, integers."""
        labels = as_int32_labels(labels, name=f"{self.name} labels")
        if len(labels) != self.n_examples:
            raise ArgumentError(f"{self.name}: {len(labels)} labels for {self.n_examples} "
                                "examples: y.set_value takes one label an example")
        self.y.set_value(labels)

    def shuffle(self, seed):
        """This split taking its minibatches in a seeded order, a new one each
        epoch: a new split over the same stored rows (nothing is copied),
        whose minibatch ``i`` of epoch ``e`` holds the rows at positions
        ``[i*B, (i+1)*B)`` of a bijection of the split computed position by
        position from ``(seed, e)`` (:mod:`int8store.order.shuffle`: the same
        order held whole or over 1, 2, 4 or 8 devices). Its classic slices
        ``x[i * B:(i + 1) * B]`` and ``y[...]``, and :meth:`minibatch`, take
        those rows in every mode, with ``i`` what :meth:`minibatches` yields,
        ``e * batches + i`` (so a data position is ``(seed, epoch, step)``).
        This split is left as it is.

        Examples
        --------
        >>> import numpy as np
        >>> ds = SharedDataset.from_arrays(np.zeros((40, 4), np.uint8), np.arange(40))
        >>> shuffled = ds.shuffle(3)
        >>> shuffled.seed, ds.seed, shuffled.data.container is ds.data.container
        (3, None, True)
        """
        shuffled = copy.copy(self)
        shuffled.seed = check_seed(seed)
        shuffled.augmentation, shuffled._epoch, shuffled._first_step = None, None, None
        shuffled.data, shuffled.y = (variable.alias(shuffled=shuffled)
                                     for variable in (self.data, self.y))
        shuffled.x = float_view(shuffled._float_view(shuffled.data[:]) if self.order is None
                                else shuffled._rows_view(self.order), shuffled)
        return shuffled

    def augment(self, augmentation, seed):
        """A float view of this split whose minibatches are augmented
        (``view[i * B:(i + 1) * B]``, the classic slice, or
        :meth:`minibatch` with ``augment=True``): each example translated,
        flipped and cut out as ``augmentation`` says (an
        :class:`~int8store.augment.spec.Augmentation` or its text, such as
        ``"translate=2,flip,cutout=8"``), on the int8 codes of the minibatch
        alone before they are widened, the draws keyed by ``(seed, epoch,
        step, example)`` (:mod:`int8store.augment.draws`): nothing of the
        set is copied and no random state is kept. :attr:`x` stays as it
        was, for evaluation, which is never augmented.

        The epoch is the shuffle's (the index counts epochs) on a shuffled
        split; otherwise the one :meth:`minibatches` was last asked for (or
        :meth:`set_epoch`).

        Examples
        --------
        >>> import numpy as np
        >>> ds = SharedDataset.from_arrays(np.zeros((4, 3, 3), np.uint8), [0, 1, 0, 1])
        >>> view = ds.augment("translate=1", seed=7)
        >>> ds.augmentation
        (Augmentation(translate=1, fill='zero', flip='none', cutout=0), 7)
        """
        if not isinstance(augmentation, Augmentation):
            augmentation = Augmentation.parse(augmentation)
        augmentation.grid(self.image_shape, self.name)  # checked here, not at the first step
        refuse_alternating_shuffled(augmentation, self.seed, self.name)
        if self.storage != "int8":
            raise ArgumentError(f"{self.name}: augmentation moves int8 codes; this split holds "
                                "a float copy (storage='float')")
        self.augmentation = (augmentation, check_seed(seed, option="--augment-seed"))
        if self._epoch is None:
            self._epoch, self._first_step = (
                shared(np.array(0, dtype=np.int64), name=f"{self.name}_augmented_{what}")
                for what in ("epoch", "first_step"))
        view = self._float_view(self.data[:]) if self.order is None \
            else self._rows_view(self.order)
        return float_view(view, self, augmented=True)

    def set_epoch(self, epoch, first_step=0):
        """Draw the augmentation of an unshuffled split for ``epoch`` (what
        :meth:`minibatches` does), index 0 being minibatch ``first_step`` of
        the epoch (a streamed shard's first)."""
        if self._epoch is not None:
            self._epoch.set_value(np.array(epoch, dtype=np.int64))
            self._first_step.set_value(np.array(first_step, dtype=np.int64))

    def minibatches(self, epoch, batch_size, start=0):
        """Each whole minibatch of ``epoch`` (0 or more) from minibatch
        ``start`` on (a run resumed mid-epoch), a :class:`~.split.Batch`:
        its index is its number unless the split is shuffled (then the index
        also says the epoch). An augmented split (:meth:`augment`) is drawn
        for ``epoch``."""
        epoch = check_epoch(epoch, self.name)
        count = self.n_batches(batch_size)
        start = check_start(start, count, self.name)
        self.set_epoch(epoch)  # (once the call is taken: a refused one drew epoch 9's)
        offset = int(epoch) * count if self.seed is not None else 0
        return (Batch(i, offset + i) for i in range(start, count))

    def scoring_plans(self, chunk_size, classic_count=False):
        """The windows that score every example once (see
        :meth:`~.split.Split.scoring_plans`): one plan, over the devices'
        rows when the split lies over several."""
        if self.blocks is not None:
            yield from self.blocks.scoring_plans(chunk_size, classic_count)
            return
        yield split_in_a_row(self.n_examples, chunk_size, classic_count, self.name)

    @property
    def devices(self):
        """How many devices the rows lie over (:func:`int8store.place`)."""
        return 1 if self.blocks is None else self.blocks.devices

    def describe_holding(self):
        """How the split is held, for :func:`int8store.memory_table`."""
        if self.blocks is not None:
            return f"{self.storage}, over {self.blocks.devices} devices"
        return self.storage

    def adopt_placement(self, labels, blocks, digest=None):
        """Record a placement over several devices made from outside (the
        rows went straight to the devices): the split's ``labels``, its
        ``blocks``, and ``digest()`` giving its :meth:`digest` (a store's,
        when no process holds every row)."""
        self._labels = as_int32_labels(labels, name=f"{self.name} labels")
        self._count = len(self._labels)
        self.blocks = blocks
        self._digest = digest

    @property
    def n_examples(self):
        """Number of examples (padding over several devices excluded)."""
        return self._count

    @property
    def n_features(self):
        return int(np.prod(self.image_shape))

    def n_batches(self, batch_size):
        """Number of whole minibatches of ``batch_size`` (the remainder is left out,
        as in the classic tutorials)."""
        batch_size = check_batch_size(batch_size, self.name)
        if self.blocks is not None:  # over several devices: each fills its part
            return self.blocks.n_batches(batch_size)
        return self.n_examples // batch_size

    def minibatch(self, index, batch_size, augment=False):
        """Symbolic ``(x, y)`` of minibatch ``index`` (a scalar variable or int).

        The minibatch has the static length ``batch_size`` (see
        :func:`int8store.nnet.minibatch`): a view of the stored rows, converted to
        floats after the slice; an index past the end is an error. With
        ``augment``, augmented as :meth:`augment` set.
        """
        labels = minibatch(self.y, index, batch_size)
        if augment and self.augmentation is None:
            raise ArgumentError(f"{self.name}: augment=True needs an augmentation: "
                                "call augment(...) first")
        if not augment:
            if self.order is not None:
                return self._rows_view(minibatch(self.order, index, batch_size)), labels
            return self._float_view(minibatch(self.data, index, batch_size)), labels
        codes = (gather_rows(self.data, minibatch(self.order, index, batch_size))
                 if self.order is not None else minibatch(self.data, index, batch_size))
        return self._float_view(self._augmented(codes, index, batch_size)), labels

    def _augmented(self, codes, index, batch_size):
        """The int8 minibatch ``codes`` of ``index`` augmented."""
        augmentation, seed = self.augmentation
        if self.seed is not None:  # the index counts the shuffle's epochs
            batches = self.n_batches(batch_size)
            step, epoch = index % batches, index // batches
        else:
            step, epoch = self._first_step + index, self._epoch
        return augmented(codes, step, epoch, augmentation, self.image_shape, seed,
                         fill_code(self.encoding), self.name)

    @property
    def nbytes(self):
        """Bytes of the stored images, in the storage used (over several
        devices, padding included: what the devices hold)."""
        return int(self.data.get_value(borrow=True, return_internal_type=True).nbytes)

    @property
    def int8_nbytes(self):
        """Bytes the images take as int8 codes."""
        return self.n_examples * self.n_features

    @property
    def float32_nbytes(self):
        """Bytes the images take as float32 (the classic tutorials' way under
        ``floatX=float32``; twice that under float64)."""
        return _FLOAT32_BYTES * self.int8_nbytes

    @property
    def label_nbytes(self):
        return int(self.y.get_value(borrow=True, return_internal_type=True).nbytes)

    def __repr__(self):
        return (f"SharedDataset({self.name!r}, {self.n_examples} examples of "
                f"{'x'.join(map(str, self.image_shape))}, storage={self.storage!r}, "
                f"normalize={self.normalize!r}, dtype={self.dtype!r}, {self.encoding.describe()})")


def shared_dataset(data_xy, normalize="unit", storage="int8", divisor=None, name="data",
                   dataset_mean=None, dtype=None, borrow=True):
    """Drop-in for the classic tutorials' ``shared_dataset``.

    Parameters
    ----------
    data_xy : (images, labels)
        Images as uint8 pixels or exactly representable floats (see
        :func:`~int8store.quantize`), labels as integers.
    normalize, storage, divisor, name, dataset_mean, dtype
        See :class:`SharedDataset`.
    borrow : bool
        Accepted for the classic signature; the codes are always a new array.

    Returns
    -------
    x : float tensor variable
        Symbolic view of the int8 images; ``x.dataset`` is the
        :class:`SharedDataset` behind it.
    y : int32 tensor variable
        The labels, as the classic's ``T.cast(shared_y, 'int32')``:
        ``y.owner.inputs[0]`` is their shared variable; count examples with
        ``y.get_value(borrow=True).shape[0]`` (:class:`~.views.LabelsView`).

    Examples
    --------
    >>> import numpy as np
    >>> images = (np.arange(12, dtype=np.float32) / 256).reshape(3, 4)
    >>> x, y = shared_dataset((images, np.array([0, 1, 2])), dtype="float32")
    >>> x.dataset.data.get_value().dtype, y.get_value(borrow=True).shape[0]
    (dtype('int8'), 3)
    >>> bool((x.get_value() == images).all())
    True
    """
    images, labels = data_xy
    ds = SharedDataset.from_arrays(images, labels, divisor=divisor, name=name,
                                   normalize=normalize, storage=storage,
                                   dataset_mean=dataset_mean, dtype=dtype)
    return ds.x, labels_view(ds)


def _evaluate(codes, encoding, normalize, dataset_mean, dtype, channel_statistics=None):
    """Run the per-pixel stage once over ``codes``: the float copy of the classic way."""
    symbolic = at.TensorType("int8", shape=(None, codes.shape[1]))()
    convert = _api.function([symbolic], per_pixel_stage(symbolic, encoding, normalize,
                                                          dataset_mean, dtype, channel_statistics))
    return np.asarray(convert(codes), dtype=dtype)
