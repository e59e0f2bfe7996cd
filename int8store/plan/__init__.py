"""The planning step: from the splits a source holds to the final train,
valid and test splits and their encoding (:mod:`.splits`), the one step
shared by ``load_data`` and ``convert``; and where ``load_splits`` holds
them, whole or streamed (:mod:`.residency`).

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`,
:mod:`int8store.codes`, :mod:`int8store.order`, :mod:`int8store.backend`,
:mod:`int8store.store`,
:mod:`int8store.sources`.
"""
