"""Splits larger than the device, or than memory, fed shard by shard:
:class:`~.split.StreamingSplit` and the shard sources (:mod:`.split`), the
process that reads a store's shards (:mod:`.shard_process`), and
``load_streams`` (:mod:`.loading`).

May import: everything below it on the spine (:mod:`int8store.errors`,
``runtime``, ``codes``, ``backend``, ``store``, ``sources``, ``plan``,
``memory``, ``dataset``).
"""
