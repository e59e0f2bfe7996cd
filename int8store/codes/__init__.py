"""What the stored numbers mean: int8 codes and the encodings that map them
to pixel values (:mod:`.encoding`), which one a data set takes
(:mod:`.survey`), float pixels encoded as they are read
(:mod:`.precoded`), labels and their checks (:mod:`.labels`), and the words
options take (:mod:`.vocabulary`).

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`.
"""
