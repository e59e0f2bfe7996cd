"""The store: one HDF5 file of int8 codes behind a checksummed manifest.
Its manifest (:mod:`.manifest`) and each split's entry in it
(:mod:`.split_entries`), per-chunk checksums (:mod:`.checksums`), opening
and reading it (:mod:`.reader`), writing it (:mod:`.writer`), and
publishing files whole or not at all (:mod:`.atomic`, also used for the
tutorials' checkpoints, :mod:`.checkpoint`).

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`,
:mod:`int8store.codes`.
"""
