#!/usr/bin/env bash
# Set up .venv with the test tools and run the whole test suite three times:
# without JAX (its tests skip), then with the [jax] extra under floatX=float32
# and floatX=float64 (Aesara's default). Extra arguments go to pytest (e.g. -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
if .venv/bin/python -c "import jax" 2>/dev/null; then
    .venv/bin/python -m pip uninstall --quiet --yes jax jaxlib
fi
echo "=== 1/3: without JAX, floatX=float64 ==="
AESARA_FLAGS=floatX=float64 .venv/bin/python -m pytest "$@"
bash scripts/setup.sh test,jax
echo "=== 2/3: with JAX, floatX=float32 ==="
AESARA_FLAGS=floatX=float32 .venv/bin/python -m pytest "$@"
echo "=== 3/3: with JAX, floatX=float64 ==="
AESARA_FLAGS=floatX=float64 .venv/bin/python -m pytest "$@"
