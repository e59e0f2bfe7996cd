#!/usr/bin/env bash
# The GPU rows of issue 44, in one call of the device tool, after
# scripts/device_wheels.sh (run(command="bash bench/gpu_check.sh", carry=[".device"])):
# int8store installed from the carried wheels beside the image's numpy, jax and
# torch, then, on the real MNIST: the time to accuracy of both tutorials against
# plain JAX and PyTorch (a first run and one with a warm compilation cache),
# LeNet5 with and without deterministic GPU ops, many steps per call, and LeNet5
# held whole against streamed. Everything printed goes to $OUT/gpu_check.txt too.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}/gpu_check.txt
python -m pip install --quiet --no-index --no-deps .device/wheels/*.whl
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # int8store from the checkout (nothing to build)
export PYTENSOR_FLAGS=mode=FAST_RUN  # (PyTensor's C mode: no numba on the device)
{
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
    python bench/time_to_accuracy.py --mnist .device/mnist.pkl.gz
    for way in "" "--no-deterministic"; do
        echo "== LeNet5, whole run ${way:-(deterministic GPU ops, the default)}"
        /usr/bin/time -f "whole process %e s" python tutorials/convolutional_mlp.py \
            --dataset .device/mnist.pkl.gz --mode jax --timings $way 2>&1 | tail -6
    done
    python bench/steps_per_call.py --rounds 5 --ks 1 10 100
    for how in "" "--max-device-bytes 16777216"; do
        echo "== LeNet5, 20 epochs ${how:-held whole}"
        python tutorials/convolutional_mlp.py --dataset .device/mnist.pkl.gz --mode jax \
            --epochs 20 $how | grep "validation error"
    done
} 2>&1 | tee "$out"
