"""The shared dataset: int8 codes in a shared variable (:mod:`.shared`),
their symbolic float views, widened inside the graph (:mod:`.symbolic`), and
``load_data`` / ``load_splits`` (:mod:`.loading`).

May import: everything below it on the spine (:mod:`int8store.errors`,
``runtime``, ``codes``, ``order``, ``backend``, ``store``, ``sources``, ``plan``,
``memory``).
"""
