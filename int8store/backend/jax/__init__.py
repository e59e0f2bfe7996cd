"""JAX mode: int8store's mode for ``function`` (:mod:`.mode`: the classic
slices as static-size minibatches, every index checked on the host), the
conversions of int8store's ops and of those the library cannot convert
(:mod:`.conversions`, its own dispatcher; :mod:`.aesara_conversions`,
:mod:`.pytensor_conversions`, :mod:`.pooling`) and the Python function they
make of a graph, its source kept out of ``/tmp``
(:mod:`.generated_source`), the Feistel order traced in
``jax.numpy`` (:mod:`.shuffle`), and data on JAX's devices: placing shared
values on one device or several (:mod:`.device`), a split in blocks over the
devices of several processes (:mod:`.sharding`); the platform the functions
are made for, the default backend's or one named (:mod:`.target`).

No module outside this room imports JAX; here, :func:`.device.place` with
mode ``"c"`` and :func:`.mode.require_jax` work without it.

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`,
:mod:`int8store.codes`, :mod:`int8store.order`,
:mod:`int8store.backend.setup`, :mod:`int8store.backend.ops`.
"""
