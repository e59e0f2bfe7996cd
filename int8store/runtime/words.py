"""Words in the messages people read: counts (``1 shard``, ``2 shards``),
lists cut to a line, and the word a mistyped one most likely meant."""


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


def listed(words, most=10):
    """``words`` joined by commas, the first ``most`` of them and how many
    more (a line, not a screen: 1,700 classes were once listed).

    >>> listed(["a", "b"]), listed(["a", "b", "c"], most=2)
    ('a, b', 'a, b, and 1 more')
    """
    words = list(words)
    more = len(words) - most
    return ", ".join(words[:most]) + (f", and {more:,} more" if more > 0 else "")


def nearest(word, known):
    """The one of ``known`` that ``word`` most likely mistypes, or None:
    difflib's close matches, one with the same letters swapped first
    (``--modle`` is ``--model``, which difflib ranks below ``--mode``).

    >>> nearest("--modle", ["--mode", "--model"]), nearest("mnsit", ["digits", "mnist"])
    ('--model', 'mnist')
    >>> nearest("xyz", ["digits"]) is None
    True
    """
    import difflib  # (only when a message needs it)

    close = difflib.get_close_matches(word, known, n=5)
    swapped = [option for option in close if sorted(option) == sorted(word)]
    return (swapped or close or [None])[0]
