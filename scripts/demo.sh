#!/usr/bin/env bash
# The main job, offline: set up .venv (PyTensor; INT8STORE_BACKEND=aesara for
# the Aesara stack) with JAX's CPU wheels, so that --mode jax works next,
# train the logistic-regression tutorial on scikit-learn's bundled digits
# with int8 images, and print its errors and memory table. Extra arguments
# go to the tutorial (e.g. --epochs 50, --mode jax).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh jax
.venv/bin/python tutorials/logistic_sgd.py --dataset digits --progress "$@"
