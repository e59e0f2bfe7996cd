"""The store: one HDF5 file of int8 codes behind a checksummed manifest.
Its format, and how a file is recognised as one (:mod:`.file_format`; a
plain HDF5 file's attributes read apart, :mod:`.plain_hdf5`); its
manifest (:mod:`.manifest`), each split's entry in it
(:mod:`.split_entries`), its encoding (:mod:`.encoding_entry`) and order
(:mod:`.order_entry`); per-chunk checksums (:mod:`.checksums`); opening and
reading it (:mod:`.reader`), its data read range by range, each checked
(:mod:`.chunk_reading`), or mapped in place (:mod:`.mapped`); writing it
(:mod:`.writer`), and
publishing files whole or not at all (:mod:`.atomic`, also used for the
tutorials' checkpoints, :mod:`.checkpoint`).

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`,
:mod:`int8store.codes`.
"""
