#!/usr/bin/env python
"""Convert an image archive into an int8store file: the same as
``int8store convert`` (run ``python scripts/convert_archive.py --help``)."""

import sys

from int8store.cli import main

if __name__ == "__main__":
    sys.exit(main(["convert", *sys.argv[1:]]))
