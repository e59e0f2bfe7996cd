"""Splits larger than the device, or than memory, fed shard by shard:
:class:`~.split.StreamingSplit` (:mod:`.split`: one shard in the shared
variables, one pass at a time), the readers that get each shard ready
(:mod:`.readers`), where shards come from (:mod:`.sources`), which examples
each holds (:mod:`.layout`), a split already loaded, streamed
(:mod:`.of_loaded`), the buffers they are copied into
(:mod:`.buffers`), the process that reads a store's shards
(:mod:`.shard_process`, which imports the sources, never the stream).
``load_streams`` is the one loading road's (:mod:`int8store.loading`).

May import: everything below it on the spine (:mod:`int8store.errors`,
``runtime``, ``codes``, ``order``, ``backend``, ``store``, ``sources``, ``plan``,
``memory``, ``dataset``).
"""

from ..runtime.exports import lazy_exports

_LAZY = {
    "StreamingSplit": ".split",
    "stream": ".of_loaded",
    "StoreShards": ".sources",
    "ArrayShards": ".sources",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
