#!/usr/bin/env bash
# Set up .venv with the test tools and run the whole test suite.
# Extra arguments go to pytest (e.g. -x, -k name).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
.venv/bin/python -m pytest "$@"
