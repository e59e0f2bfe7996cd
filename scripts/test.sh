#!/usr/bin/env bash
# Run the whole test suite on both stacks, each in its own virtual environment:
#   PyTensor (.venv-pytensor: the newest Python 3.11-3.13, numpy 2, JAX on the
#     CPU), under floatX=float32 and floatX=float64 (the library's default);
#   Aesara (.venv-aesara: Python 3.11 first, numpy 1.26), without JAX (its
#     tests skip, saying why) under float64, then with JAX under float32.
# INT8STORE_BACKEND=pytensor or =aesara runs that stack only. Without it, a
# machine with no Python 3.10-3.12 runs the PyTensor stack and says it skipped
# Aesara's. With two cores or more the stacks run side by side (see
# both_stacks_side_by_side). Extra arguments go to pytest (e.g. -x).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each run has a temporary folder of its own, removed when it ends: the
# libraries' own JAX and Numba modes, which the tests try too, leave a source
# file in it for each function they compile, and nothing else removes them.
run() {  # run BACKEND STEP FLOATX [PYTEST ARGS]: pytest in that stack's environment
    local backend=$1 step=$2 floatx=$3 flags scratch status=0
    shift 3
    flags=$(tr '[:lower:]' '[:upper:]' <<<"$backend")_FLAGS
    echo "=== $step: $backend, floatX=$floatx ==="
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/int8store-tests.XXXXXX")
    env INT8STORE_BACKEND="$backend" "$flags=floatX=$floatx" TMPDIR="$scratch" \
        ".venv-$backend/bin/python" -m pytest "$@" "${pytest_args[@]+"${pytest_args[@]}"}" \
        || status=$?
    rm -rf "$scratch"
    return "$status"
}
# A stack's second run leaves out the tests that build no graph (readers,
# stores, hostile inputs, fuzzing) and those whose subprocesses set their own
# floatX (the classic clients, in C mode): the run's floatX cannot change them,
# and JAX is not what they use.
# PyTensor's also leaves out, to keep the suite's time down, the several-device
# ones (run under float32, and in Aesara's JAX run) and those that build graphs
# but check what floatX cannot change: orders, augmentation of the int8 codes,
# streaming, files and messages (marker floatx_blind; Aesara's runs have them
# under float64 and float32). Numbers in floatX (views, models, tutorials'
# figures, memory plans) run under both.
second=(-m "not graph_free and not own_flags")

pytensor_setup() {
    INT8STORE_BACKEND=pytensor VENV=.venv-pytensor bash scripts/setup.sh test,jax
}

pytensor_runs() {
    run pytensor "PyTensor 1/2" float32
    run pytensor "PyTensor 2/2" float64 \
        -m "not graph_free and not own_flags and not devices and not floatx_blind"
}

pytensor_stack() {
    pytensor_setup
    pytensor_runs
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

# Both stacks side by side, when there are cores for it: they share nothing
# (own environments, compile caches and temporary folders), and each keeps
# about one core busy (one pytest process: its tests, and the C modules it
# compiles, one at a time). The Aesara stack
# starts once the PyTensor environment is set up (two editable installs of
# one checkout at once are not something pip promises to handle), in a
# process group of its own, its output kept until the PyTensor runs end;
# Ctrl-C or a failure ends both. INT8STORE_TEST_JOBS=1 runs them one after
# the other.
both_stacks_side_by_side() {
    local status=0
    pytensor_setup
    # (globals: the EXIT trap reads them)
    aesara_log=$(mktemp "${TMPDIR:-/tmp}/int8store-aesara-stack.XXXXXX")
    setsid env INT8STORE_BACKEND=aesara bash scripts/test.sh \
        "${pytest_args[@]+"${pytest_args[@]}"}" > "$aesara_log" 2>&1 &
    aesara_group=$!
    trap 'kill -TERM -- "-$aesara_group" 2>/dev/null || true; rm -f "$aesara_log"' EXIT
    trap 'exit 130' INT  # (a signal that kills bash skips its EXIT trap)
    trap 'exit 143' TERM
    pytensor_runs
    echo "=== the Aesara stack, which ran beside the PyTensor stack ==="
    wait "$aesara_group" || status=$?
    cat "$aesara_log"
    exit "$status"
}

pytest_args=("$@")
case ${INT8STORE_BACKEND:-both} in
    pytensor) pytensor_stack ;;
    aesara) aesara_stack ;;
    both)
        if ! INT8STORE_BACKEND=aesara bash scripts/setup.sh --find-python >/dev/null 2>&1; then
            pytensor_stack
            echo "=== Aesara stack skipped: it needs Python 3.10-3.12, and this machine has none ==="
        elif [ "${INT8STORE_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}" -ge 2 ] \
                && command -v setsid >/dev/null 2>&1; then
            both_stacks_side_by_side
        else
            pytensor_stack
            aesara_stack
        fi ;;
    *) echo "error: INT8STORE_BACKEND=$INT8STORE_BACKEND is not one of pytensor, aesara" >&2; exit 2 ;;
esac
