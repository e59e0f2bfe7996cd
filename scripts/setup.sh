#!/usr/bin/env bash
# Create a virtual environment and install int8store into it, editable, with
# its graph library:
#   PyTensor (the default): Python 3.11-3.13, numpy 2, current JAX;
#   Aesara (INT8STORE_BACKEND=aesara): Python 3.10-3.12, numpy < 2, JAX < 0.8.
#   bash scripts/setup.sh            the library and tutorials
#   bash scripts/setup.sh test,jax   ... plus extras
#   bash scripts/setup.sh --find-python   print the Python the stack would use (exit 2: none)
# VENV=path chooses the environment (default .venv); PYTHON=/path/to/python the
# interpreter. An environment made for the other stack is made anew.
set -euo pipefail
cd "$(dirname "$0")/.."

backend=${INT8STORE_BACKEND:-pytensor}
case $backend in
    pytensor) minors="13 12 11" ;;
    aesara) minors="11 12 10" ;;  # 3.11 first: numpy.distutils is there, as Aesara expects
    *) echo "error: INT8STORE_BACKEND=$backend is not one of pytensor, aesara" >&2; exit 2 ;;
esac
venv=${VENV:-.venv}
highest=$(tr ' ' '\n' <<<"$minors" | sort -n | tail -1)
lowest=$(tr ' ' '\n' <<<"$minors" | sort -n | head -1)
supported="import sys; sys.exit(not (3, $lowest) <= sys.version_info[:2] <= (3, $highest))"

find_python() {  # the first supported interpreter, or an error and exit 2
    local candidates=${PYTHON:-} minor candidate
    for minor in $minors; do
        candidates="$candidates python3.$minor"
        # A Python that pyenv installed but did not put on the PATH.
        if command -v pyenv >/dev/null 2>&1; then
            candidates="$candidates $(ls -d "$(pyenv root)"/versions/3."$minor".*/bin/python3."$minor" 2>/dev/null | sort -V | tail -1)"
        fi
    done
    for candidate in $candidates python3; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "$supported" 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
    echo "error: the $backend stack needs Python 3.$lowest to 3.$highest; none found." \
         "Set PYTHON=/path/to/python3.x" >&2
    exit 2
}

if [ "${1:-}" = --find-python ]; then  # say which Python this stack would use, set up nothing
    find_python
    exit 0
fi

if ! { [ -x "$venv/bin/python" ] && [ "$(cat "$venv/int8store-backend" 2>/dev/null)" = "$backend" ] \
        && "$venv/bin/python" -c "$supported" 2>/dev/null; }; then
    python=$(find_python)
    rm -rf "$venv"
    echo "... creating $venv with $("$python" --version) for the $backend stack"
    "$python" -m venv "$venv"
    echo "$backend" > "$venv/int8store-backend"
fi

extras=$backend${1:+,$1}
pins=()
# JAX >= 0.8 needs numpy >= 2, which Aesara cannot use: say so, rather than
# let the resolver try every newer JAX first.
if [ "$backend" = aesara ] && [[ ",$extras," == *,jax,* ]]; then pins+=("jax<0.8"); fi
echo "... installing int8store[$extras] into $venv"
# pip's output goes to a log, shown when it fails: a first run shows the
# result, not a page of this machine's pip configuration notices.
log=$venv/pip-install.log
if ! "$venv/bin/python" -m pip install --disable-pip-version-check -e ".[$extras]" \
        ${pins[@]+"${pins[@]}"} > "$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "error: pip could not install int8store[$extras] into $venv (the end of its output" \
         "is above; all of it is in $log)" >&2
    exit 1
fi

if [ "$backend" = aesara ]; then
    # `import aesara` probes for a BLAS through numpy.distutils: on Python 3.12
    # (no numpy.distutils) the import fails before int8store can give it one;
    # on 3.10 and 3.11 it prints numpy's "no BLAS found" warnings, false ones.
    # A start-up hook in this environment (only) runs that import with the
    # BLAS int8store gives Aesara anyway: see int8store/backend/aesara_startup.py.
    # (It does nothing once int8store is uninstalled from the environment.)
    "$venv/bin/python" -m int8store.backend.setup.aesara_hook > /dev/null
fi
