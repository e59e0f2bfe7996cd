"""The shared dataset: what every split offers, however held (:mod:`.split`),
int8 codes in a shared variable (:mod:`.shared`), their symbolic float
views, widened inside the graph (:mod:`.symbolic`), and a store's splits
spread over devices (:mod:`.over_devices`). ``load_data`` / ``load_splits``
are the one loading road's (:mod:`int8store.loading`).

May import: everything below it on the spine (:mod:`int8store.errors`,
``runtime``, ``codes``, ``order``, ``backend``, ``store``, ``sources``, ``plan``,
``memory``).
"""
