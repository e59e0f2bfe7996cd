"""Counts in the messages people read: ``1 shard``, ``2 shards``."""


def counted(number, noun):
    """``"1 class"``, ``"3 classes"``, ``"60,000 examples"``,
    ``"2 whole minibatches"``: the number with thousands separators, the noun
    in the plural unless the number is one."""
    if number == 1:
        return f"1 {noun}"
    suffix = "es" if noun.endswith(("s", "ch", "sh", "x")) else "s"
    return f"{number:,} {noun}{suffix}"
