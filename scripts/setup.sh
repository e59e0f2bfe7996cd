#!/usr/bin/env bash
# Create .venv with a Python 3.10-3.12 and install int8store into it, editable.
#   bash scripts/setup.sh          the library and tutorials
#   bash scripts/setup.sh test     ... plus the test tools
# Set PYTHON=/path/to/python to choose the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."

supported='import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 12))'

if ! { [ -x .venv/bin/python ] && .venv/bin/python -c "$supported" 2>/dev/null; }; then
    python=
    for candidate in ${PYTHON:-} python3.12 python3.11 python3.10 python3; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "$supported" 2>/dev/null; then
            python=$candidate
            break
        fi
    done
    if [ -z "$python" ]; then
        echo "error: int8store needs Python 3.10, 3.11 or 3.12 (Aesara 2.9.4 needs numpy < 2);" \
             "none found. Set PYTHON=/path/to/python3.x" >&2
        exit 2
    fi
    rm -rf .venv
    echo "... creating .venv with $("$python" --version)"
    "$python" -m venv .venv
fi

extras=${1:-}
echo "... installing int8store${extras:+[$extras]} into .venv"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${extras:+[$extras]}"
