"""Memory: what a dataset and a model's training step take (:mod:`.estimates`,
from the reference models' graphs, :mod:`.reference_models` and
:mod:`.models`, measured by :mod:`.step_memory`), and the ``budget`` command
(:mod:`.budget`).

May import: everything below it on the spine: :mod:`int8store.errors`,
:mod:`int8store.runtime`, :mod:`int8store.codes`, :mod:`int8store.order`,
:mod:`int8store.backend`,
:mod:`int8store.store`, :mod:`int8store.sources`, :mod:`int8store.plan`.
"""
