"""``python -m int8store``: the ``int8store`` command (:mod:`int8store.cli`),
for an environment whose scripts folder is not on the ``PATH``."""

import sys

from .cli import main

sys.exit(main())
