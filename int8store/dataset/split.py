"""What every split offers, however it is held: :class:`Split`.

A split is held whole on one device (:class:`~int8store.SharedDataset`), in
rows spread over several (the same class, placed over devices), or fed to
the device shard by shard (:class:`~int8store.StreamingSplit`). The holding
decides *how* a minibatch is reached (a slice of the whole, a slice of each
device's rows, a slice of the shard now loaded), never *which* examples it
holds: minibatch ``i`` of epoch ``e`` is the same examples in every
residency, mode and device count. So every caller walks an epoch the same
way, and none asks which kind of split it holds:

* :meth:`Split.minibatches` gives each whole minibatch of an epoch as a
  :class:`Batch`: its number in the epoch, the index the compiled step takes
  (``train_model(batch.index)``, the classic ``givens`` slicing the split's
  ``x`` and ``y``), and whether the split's shard is replaced after it;
* :meth:`Split.calls` groups those into calls of up to K steps
  (:func:`int8store.training.steps_function`), never across a shard;
* :meth:`Split.scoring_plans` gives the windows that score every example
  once (:mod:`int8store.order.windows`), a plan a call.
"""

from ..errors import ArgumentError

__all__ = ["Split", "Batch"]


class Batch:
    """A whole minibatch of an epoch, as :meth:`Split.minibatches` gives it:
    ``number``, ``index`` and ``ends_shard`` (below).

    A streamed split's index is a place in the shard loaded when the
    minibatch was given, and means nothing once that shard has left the
    device: read then (a list of the epoch's minibatches made first), it
    raises :class:`~int8store.StreamError` rather than name the rows of
    another shard. ``check`` is what asks (None: always valid)."""

    __slots__ = ("number", "_index", "ends_shard", "_check")

    def __init__(self, number, index, ends_shard=False, check=None):
        #: Its number in the epoch (0 to ``n_batches - 1``).
        self.number = number
        self._index = index
        #: Whether the split's shard in the shared variables is replaced after
        #: this minibatch (streamed): a call of many steps ends here.
        self.ends_shard = ends_shard
        self._check = check

    @property
    def index(self):
        """What the compiled step takes to read it (``train_model(index)``):
        the number itself held whole; with the epoch in it for a shuffled
        split (``epoch * n_batches + number``); its place in the shard now
        loaded when streamed."""
        if self._check is not None:
            self._check(self)
        return self._index

    # (read as the tuple it was: ``number, index, ends_shard = batch``, ``batch[1]``)
    def __iter__(self):
        return iter((self.number, self.index, self.ends_shard))

    def __getitem__(self, item):
        if isinstance(item, slice) or item in (1, -2):
            return tuple(self)[item]
        return (self.number, None, self.ends_shard)[item]  # (not the index: nothing to check)

    def __len__(self):
        return 3

    def __eq__(self, other):
        return isinstance(other, Batch) and \
            (self.number, self._index, self.ends_shard) == (other.number, other._index, other.ends_shard)

    def __hash__(self):
        return hash((self.number, self._index, self.ends_shard))

    def __repr__(self):
        return f"Batch(number={self.number}, index={self._index}, ends_shard={self.ends_shard})"


class Split:
    """The interface of a split (see the module docstring). Subclasses give
    ``name``, ``x`` and ``y`` (the classic ``givens`` slice them),
    ``n_examples``, ``labels`` (host memory), ``image_shape``,
    :meth:`n_batches`, :meth:`minibatches`, :meth:`scoring_plans`,
    :meth:`digest` and :meth:`describe_holding`; :attr:`devices`,
    :meth:`largest_batch` and :meth:`largest_call` say what a minibatch and a
    call of many steps may take."""

    def minibatches(self, epoch, batch_size, start=0):
        """Each whole minibatch of epoch ``epoch`` (0 or more) from number
        ``start`` on (a run resumed mid-epoch), as a :class:`Batch`; a
        streamed split loads each shard before its minibatches and reads
        none before the one that holds ``start``. Close the iterator to
        leave the epoch early."""
        raise NotImplementedError

    def scoring_plans(self, chunk_size, classic_count=False):
        """The windows that score every example once, ``(starts, weights)``
        a call (:mod:`int8store.order.windows`); a streamed split loads each
        shard before its plan. ``classic_count``: whole chunks only."""
        raise NotImplementedError

    def calls(self, epoch, batch_size, steps, ends=None, start=0):
        """The minibatches of epoch ``epoch`` grouped into calls of at most
        ``steps`` updates: ``(first number, first index, count)`` for each
        call, which trains on minibatches ``first number`` to ``first number
        + count - 1`` of the epoch, at indices ``first index`` onwards
        (``train_steps(first_index, count)``).

        A call ends after ``steps`` minibatches, where the split's shard is
        replaced (each call is made while its shard is loaded), and after
        any minibatch ``number`` for which ``ends(number)`` is true: where
        the training loop looks at the model (a validation, the end of its
        patience). ``ends`` is asked as each call is formed, after the
        calls before it were made. Close the iterator to leave the epoch
        early.
        """
        if int(steps) != steps or steps < 1:
            raise ArgumentError(f"steps={steps!r}: expected a positive number of updates a call")
        batches = self.minibatches(epoch, batch_size, start)
        try:
            first, count = None, 0
            for batch in batches:
                if first is None:
                    first = (batch.number, batch.index)
                count += 1
                if count == steps or batch.ends_shard or (ends is not None and ends(batch.number)):
                    yield first + (count,)
                    first, count = None, 0
            if first is not None:
                yield first + (count,)
        finally:
            batches.close()

    #: How many devices the split's rows lie over.
    devices = 1

    #: What the data's class numbers stand for, where it names its classes
    #: (class folders, a store's manifest, CIFAR-10's ``batches.meta``), as
    #: :func:`int8store.load_splits` found them: a list, name ``i`` for
    #: label ``i``; None for data without names.
    label_names = None

    def largest_batch(self):
        """The most examples one minibatch can take: the split's (a shard's
        when streamed)."""
        return self.n_examples

    def largest_call(self, batch_size):
        """The most minibatches one call of :meth:`calls` can take: an
        epoch's (a shard's when streamed)."""
        return self.n_batches(batch_size)

    def close(self):
        """Stop whatever the split started (a streamed split's reading); idempotent."""
