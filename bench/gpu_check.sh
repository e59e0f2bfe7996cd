#!/usr/bin/env bash
# The GPU rows of issue 44, in two calls of the device tool (each under its
# 10-minute limit), after scripts/device_wheels.sh:
#   run(command="bash bench/gpu_check.sh 1", carry=[".device"])   # about 4 minutes on an H100
#   run(command="bash bench/gpu_check.sh 2", carry=[".device"])   # about 4 minutes
# int8store runs from the checkout, PyTensor and the rest installed from the
# carried wheels beside the image's numpy, jax and torch; the data is the
# real MNIST. Part 1: the time to accuracy of both tutorials against plain
# JAX and PyTorch resident (a first run, then one with a warm compilation
# cache; PyTorch's DataLoader, 95 s and far behind, left out). Part 2: the
# cost of deterministic GPU ops on a whole LeNet5 run, many steps per call,
# and the same lines held whole, streamed, killed and resumed, with and
# without deterministic ops. What it prints goes to $OUT/gpu_check_PART.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:?"which part: 1 or 2"}
out=${OUT:-/tmp}/gpu_check_$part.txt
python -m pip install --quiet --no-index --no-deps .device/wheels/*.whl
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # int8store from the checkout (nothing to build)
export PYTENSOR_FLAGS=mode=FAST_RUN  # (PyTensor's C mode: no numba on the device)
mnist=.device/mnist.pkl.gz
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python -c "import jax, numpy; print('jax', jax.__version__, 'numpy', numpy.__version__, jax.devices())"
    case $part in
    1)
        python bench/time_to_accuracy.py --mnist $mnist --skip "torch DataLoader"
        ;;
    2)
        for way in "" "--no-deterministic"; do
            echo "== LeNet5, whole run ${way:-(deterministic GPU ops, the default)}"
            /usr/bin/time -f "whole process %e s" python tutorials/convolutional_mlp.py \
                --dataset $mnist --mode jax --timings $way 2>&1 | tail -7
        done
        python bench/steps_per_call.py --rounds 5 --ks 1 10 100
        python bench/same_lines.py --dataset $mnist --epochs 20
        python bench/same_lines.py --dataset $mnist --epochs 20 -- --no-deterministic
        ;;
    esac
} 2>&1 | tee "$out"
