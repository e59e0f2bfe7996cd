"""Setting the graph library up: which one runs (:mod:`.selection`), its
BLAS (:mod:`.blas`), corrections of Aesara's defects (:mod:`.fixes`), all
done once by :func:`~.library.set_up`; the one entry point,
:func:`~.activation.activate`, which returns :mod:`.api`, the library's names
the rest of the package builds graphs with (the tensor module, ``function``,
``shared``, the float dtype); and int8store's C mode on PyTensor
(:mod:`.c_mode`).

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`,
:mod:`int8store.codes`, :mod:`int8store.order` (the first of ``backend``'s
rooms: none of the others, nor the door).
"""
