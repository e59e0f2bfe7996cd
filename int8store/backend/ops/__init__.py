"""int8store's own graph ops and their implementations: the static-size
minibatch (:mod:`.minibatch`), rows gathered by index and decoded in one pass
(:mod:`.gather`), a shard's shuffled order in C (:mod:`.permutation`),
minibatches augmented from their int8 codes (:mod:`.augment`), a split's
rows as a shared variable that shows the split wherever they lie
(:mod:`.shared_rows`), and
Theano's conv2d and pool_2d (:mod:`.nnet`: Aesara's own, or on PyTensor,
which has none, int8store's ops: :mod:`.conv` over the numpy im2col of
:mod:`.im2col`, :mod:`.pooling`, what they share in :mod:`.windows`). Each op
has a numpy ``perform``, C code where it pays; how each runs in PyTensor's
Numba mode is declared to :mod:`.numba`, which installs it once. Their JAX
conversions are in ``backend``'s JAX room.

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`,
:mod:`int8store.codes`, :mod:`int8store.order`, :mod:`int8store.augment`,
:mod:`int8store.backend.setup`.
"""
