"""Counts in the messages people read: ``1 shard``, ``2 shards``."""


def counted(number, noun):
    """The number with thousands separators, and the noun in the plural
    unless the number is one.

    >>> counted(1, "shard"), counted(60000, "example"), counted(3, "class")
    ('1 shard', '60,000 examples', '3 classes')
    >>> counted(2, "whole minibatch")
    '2 whole minibatches'
    """
    if number == 1:
        return f"1 {noun}"
    suffix = "es" if noun.endswith(("s", "ch", "sh", "x")) else "s"
    return f"{number:,} {noun}{suffix}"
