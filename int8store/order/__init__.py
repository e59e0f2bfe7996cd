"""Which example goes where, as plain arithmetic that imports no graph
library: the seeded order of a split's examples, computed position by
position (:mod:`.shuffle`: a Feistel network, the same in numpy, in JAX and
in C), which rows each of several devices holds (:mod:`.blocks`),
where an epoch may start (:mod:`.position`), the batch size a run takes
(:mod:`.batch_size`), how many examples a streamed shard holds
(:mod:`.shard_size`), and a source's examples and
their classes: sorted by class or not, shuffled, cut in proportion
(:mod:`.classes`). The
stream, the reading process, the benchmarks and the graph ops all take
their orders from here, so none of them needs a backend to know one.

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`.
"""
