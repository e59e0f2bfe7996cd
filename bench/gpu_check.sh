#!/usr/bin/env bash
# The GPU rows of issue 44, in two calls of the device tool (each well under
# its 10-minute limit) and a third if time is left, after scripts/device_wheels.sh:
#   run(command="bash bench/gpu_check.sh 1", carry=[".device"])   # about 4 minutes on an H100
#   run(command="bash bench/gpu_check.sh 2", carry=[".device"])   # about 4 minutes
#   run(command="bash bench/gpu_check.sh 3", carry=[".device"])   # 2 minutes, if time is left
# int8store runs from the checkout, PyTensor and what else the image lacks
# installed from the carried wheels; the data is the real MNIST. Part 1: the
# time to accuracy of both tutorials against plain JAX and PyTorch resident
# (a first run, then one with a warm compilation cache; PyTorch's
# DataLoader, 95 s and far behind, left out). Part 2: the
# cost of deterministic GPU ops on a whole LeNet5 run, many steps per call,
# and the same lines held whole, streamed, killed and resumed, with and
# without deterministic ops. Part 3: steps a call under XLA's GPU flags
# that may serve better (deterministic ops another way, CUDA graphs of the
# whole loop). What it prints goes to $OUT/gpu_check_PART.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:?"which part: 1, 2 or 3"}
out=${OUT:-/tmp}/gpu_check_$part.txt
# The carried wheels of packages the image lacks (its own are kept: the image
# has most of them, and numpy, jax and torch as a GPU user has them).
missing=$(python - <<'PY'
import importlib.metadata, pathlib
for wheel in sorted(pathlib.Path(".device/wheels").glob("*.whl")):
    try:
        importlib.metadata.version(wheel.name.split("-")[0])
    except importlib.metadata.PackageNotFoundError:
        print(wheel)
PY
)
[ -z "$missing" ] || python -m pip install --quiet --no-index --no-deps $missing
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # int8store from the checkout (nothing to build)
export PYTENSOR_FLAGS=mode=FAST_RUN  # (PyTensor's C mode: no numba on the device)
export PYTHONUNBUFFERED=1  # each line into $OUT as it comes: a call cut off at its limit keeps them
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
    3)  # if device time is left: XLA's GPU flags that may make a step cheaper, or
        # deterministic for less (autotuned once, the choice kept for later programs)
        for flags in "" "--xla_gpu_deterministic_ops=true" \
            "--xla_gpu_exclude_nondeterministic_ops=true --xla_gpu_per_fusion_autotune_cache_dir=/tmp/autotune" \
            "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"; do
            echo "== XLA_FLAGS=$flags"
            XLA_FLAGS=$flags python bench/steps_per_call.py --rounds 3 --ks 1 100 \
                --cases lenet5-500 mlp-20 logistic-600 | grep -E "int8store|plain"
        done
        ;;
    esac
} 2>&1 | tee "$out"
