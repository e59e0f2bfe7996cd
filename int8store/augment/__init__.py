"""Augmentation of int8 minibatches, as plain arithmetic that imports no
graph library: what an augmentation is (:mod:`.spec`: translation with a
fill, flips, cut-out, parsed from ``"translate=2,flip,cutout=8"``) and what
it does to a minibatch of codes (:mod:`.draws`: each example's shift, flip
and cut-out drawn from a counter-based key of (seed, epoch, step, example),
then the pixels moved by index arithmetic). The same arithmetic runs in
numpy, in ``jax.numpy`` and in C (the graph op in
:mod:`int8store.backend.ops.augment`), so every mode gives the same int8
minibatch, bit for bit.

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`, :mod:`int8store.order`.
"""
