"""A command line's parser whose errors are one line, naming the mistake:
the ``int8store`` command's and the tutorials'; and the options they share."""

import argparse
import sys

from .words import nearest

__all__ = ["OneLineParser", "devices_option", "size_option"]


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, as every other error
    int8store prints (argparse's usage block made 3 to 12), pointing to
    ``--help``; an option it does not know is named first, with the nearest
    it does (``--ouptut`` was reported as "-o/--output is required" only)."""

    def parse_known_args(self, args=None, namespace=None):
        self._given = list(sys.argv[1:] if args is None else args)  # (the error names them)
        namespace, extras = super().parse_known_args(args, namespace)
        # The options given a value other than their default, by their long
        # names: what a mode that takes only some of them refuses by name.
        namespace.options_given = tuple(getattr(namespace, "options_given", ())) + tuple(
            action.option_strings[-1] for action in self._actions
            if action.option_strings and argparse.SUPPRESS not in (action.dest, action.default)
            and getattr(namespace, action.dest, None) != action.default)
        return namespace, extras

    def error(self, message):
        given = getattr(self, "_given", [])
        given = given[:given.index("--")] if "--" in given else given  # (then no options)
        parser = self._command(given)
        known = [o for o in parser._option_string_actions if o.startswith("--")]
        unknown = [a.split("=")[0] for a in given if a.startswith("--")
                   and not any(o.startswith(a.split("=")[0]) for o in known)]  # (abbreviations)
        if unknown:
            suggested = nearest(unknown[0], known)
            message = (f"{unknown[0]} is not an option of {parser.prog}"
                       + (f" (did you mean {suggested}?)" if suggested else ""))
        self.exit(2, f"error: {message}; {parser.prog} --help lists the options\n")

    def _command(self, given):
        """The parser of the command ``given`` names, or this one (the words
        a command did not take are refused by the parser above it)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                word = next((w for w in given if not w.startswith("-")), None)
                if word in action.choices:
                    return action.choices[word]
        return self


def devices_option(text):
    """--devices: a count, or 'all'."""
    if text == "all":
        return text
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"expected a number of devices or 'all', got {text!r}")
    return count


def size_option(name):
    """The ``type=`` of a size option such as ``--max-memory``: its bytes
    (:func:`~int8store.runtime.limits.parse_size`), a size refused by
    argparse in one line that names the option (as given to a keyword,
    ``max_memory='0'`` was named, which the command line has not)."""
    from ..errors import ArgumentError
    from .limits import parse_size

    def size(text):
        try:
            return parse_size(text, name)
        except ArgumentError as error:
            raise argparse.ArgumentTypeError(f"{text!r}: {str(error).split(': ', 1)[1]}") from None

    size.__name__ = name  # (argparse names a type by it where it fails otherwise)
    return size
