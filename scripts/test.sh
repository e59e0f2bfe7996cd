#!/usr/bin/env bash
# Run the whole test suite on both stacks, each in its own virtual environment:
#   PyTensor (.venv-pytensor: the newest Python 3.11-3.13, numpy 2, JAX on the
#     CPU), under floatX=float32 and floatX=float64 (the library's default);
#   Aesara (.venv-aesara: Python 3.11 first, numpy 1.26), without JAX (its
#     tests skip, saying why) under float64, then with JAX under float32.
# INT8STORE_BACKEND=pytensor or =aesara runs that stack only. Without it, a
# machine with no Python 3.10-3.12 runs the PyTensor stack and says it skipped
# Aesara's. Extra arguments go to pytest (e.g. -x).
set -euo pipefail
cd "$(dirname "$0")/.."

run() {  # run BACKEND STEP FLOATX [PYTEST ARGS]: pytest in that stack's environment
    local backend=$1 step=$2 floatx=$3 flags
    shift 3
    flags=$(tr '[:lower:]' '[:upper:]' <<<"$backend")_FLAGS
    echo "=== $step: $backend, floatX=$floatx ==="
    env INT8STORE_BACKEND="$backend" "$flags=floatX=$floatx" \
        ".venv-$backend/bin/python" -m pytest "$@" "${pytest_args[@]+"${pytest_args[@]}"}"
}
# A stack's second run leaves out the tests that build no graph (readers,
# stores, hostile inputs, fuzzing) and those whose subprocesses set their own
# floatX (the classic clients, in C mode): the run's floatX cannot change them,
# and JAX is not what they use.
# PyTensor's also leaves out the several-device ones, run under float32 (and
# in Aesara's JAX run), to keep the suite's time down.
second=(-m "not graph_free and not own_flags")

pytensor_stack() {
    INT8STORE_BACKEND=pytensor VENV=.venv-pytensor bash scripts/setup.sh test,jax
    run pytensor "PyTensor 1/2" float32
    run pytensor "PyTensor 2/2" float64 -m "not graph_free and not own_flags and not devices"
}

aesara_stack() {
    INT8STORE_BACKEND=aesara VENV=.venv-aesara bash scripts/setup.sh test
    if .venv-aesara/bin/python -c "import jax" 2>/dev/null; then
        .venv-aesara/bin/python -m pip uninstall --quiet --yes jax jaxlib
    fi
    run aesara "Aesara 1/2 (without JAX)" float64
    INT8STORE_BACKEND=aesara VENV=.venv-aesara bash scripts/setup.sh test,jax
    run aesara "Aesara 2/2" float32 "${second[@]}"
}

pytest_args=("$@")
case ${INT8STORE_BACKEND:-both} in
    pytensor) pytensor_stack ;;
    aesara) aesara_stack ;;
    both)
        pytensor_stack
        if INT8STORE_BACKEND=aesara bash scripts/setup.sh --find-python >/dev/null 2>&1; then
            aesara_stack
        else
            echo "=== Aesara stack skipped: it needs Python 3.10-3.12, and this machine has none ==="
        fi ;;
    *) echo "error: INT8STORE_BACKEND=$INT8STORE_BACKEND is not one of pytensor, aesara" >&2; exit 2 ;;
esac
