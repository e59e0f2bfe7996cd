#!/usr/bin/env bash
# The GPU rows of issue 44, one call of the device tool a part (each well
# under its 10-minute limit), after scripts/device_wheels.sh:
#   run(command="bash bench/gpu_check.sh 1", carry=[".device"])   # 217 s on an H200 (2026-11-27)
#   run(command="bash bench/gpu_check.sh 2", carry=[".device"])   # 181 s on an H200 (before its ABBA: about 4 min)
#   run(command="bash bench/gpu_check.sh 3", carry=[".device"])   # about 3 minutes
#   run(command="bash bench/gpu_check.sh 4", carry=[".device"])   # 4 minutes on an H200 (2026-11-28)
#   run(command="bash bench/gpu_check.sh 5", carry=[".device"])   # 80 s on an H200
# int8store runs from the checkout, PyTensor and what else the image lacks
# installed from the carried wheels; the data is the real MNIST. Part 1: the
# time to accuracy of both tutorials against plain JAX and PyTorch resident
# (a first run, then one with a warm compilation cache; PyTorch's
# DataLoader, 95 s and far behind, left out). Part 2: the
# cost of deterministic GPU ops on a whole LeNet5 run, many steps per call,
# and the same lines held whole, streamed, killed and resumed, with and
# without deterministic ops. Part 3: steps a call under XLA's GPU flags
# that may serve better (deterministic ops another way, CUDA graphs of the
# whole loop). Part 4: where the runs differ and spend their time:
# - what XLA's autotuner chose for the held-whole and the streamed run's
#   steps (bench/gpu_programs.py); whether a fresh compilation of the held
#   run is the same bit for bit, and whether XLA's persisted autotuning
#   results make the streamed run the held one;
# - which form of LeNet5's convolutions cuDNN runs fastest
#   (bench/conv_forms.py), and the whole tutorial in both forms of the
#   forward convolutions' turned kernel (kernel_turn.TURN_APART_ON_GPU);
# - the scoring's time by the size of its groups of windows;
# - the start of a run (CUDA, the first transfer, the rest under cProfile);
# - a LeNet5 run's own time, function by function.
# Part 5: the start of a run (bench/gpu_start.py) with JAX's memory pool and
# without it, which a run set up by int8store declines, fresh processes
# interleaved, and the logistic tutorial's whole process both ways.
# What it prints goes to $OUT/gpu_check_PART.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:?"which part: 1, 2, 3, 4 or 5"}
case $part in
1|2|3|4|5) ;;
*) echo "gpu_check.sh: no part '$part': give 1, 2, 3, 4 or 5 (see the comments at its top)" >&2
   exit 2 ;;
esac
# (on a machine without one it ran on the CPU for minutes before failing)
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    echo "gpu_check.sh: needs an NVIDIA GPU (nvidia-smi finds none): run it through the device tool" >&2
    exit 2
fi
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
if [ ! -f $mnist ]; then
    echo "gpu_check.sh: no $mnist: run scripts/device_wheels.sh here first, and carry .device" >&2
    exit 2
fi
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python -c "import jax, numpy; print('jax', jax.__version__, 'numpy', numpy.__version__, jax.devices())"
    case $part in
    1)
        python bench/time_to_accuracy.py --mnist $mnist --skip "torch DataLoader"
        ;;
    2)
        # in the order ABBA, so that drift in the machine falls on both ways
        for way in "" "--no-deterministic" "--no-deterministic" ""; do
            echo "== LeNet5, whole run ${way:-(deterministic GPU ops, the default)}"
            /usr/bin/time -f "whole process %e s" python tutorials/convolutional_mlp.py \
                --dataset $mnist --mode jax --timings $way 2>&1 | tail -7
        done
        python bench/steps_per_call.py --rounds 5 --ks 1 10 100
        python bench/same_lines.py --dataset $mnist --epochs 20
        python bench/same_lines.py --dataset $mnist --epochs 20 -- --no-deterministic
        ;;
    3)  # if device time is left: XLA's GPU flags that may make a step cheaper, or
        # deterministic for less (autotuned once, the choice kept for later programs);
        # the loop's body in CUDA graphs (XLA's command buffers: WHILE is not among
        # its defaults), unrolled into one graph, or with graphs of any size
        mkdir -p /tmp/autotune  # (XLA's autotuning cache folder must exist)
        for flags in "" "--xla_gpu_deterministic_ops=true" \
            "--xla_gpu_exclude_nondeterministic_ops=true --xla_gpu_per_fusion_autotune_cache_dir=/tmp/autotune" \
            "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL" \
            "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL --xla_gpu_command_buffer_unroll_loops=true" \
            "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL --xla_gpu_graph_min_graph_size=1"; do
            echo "== XLA_FLAGS=$flags"
            XLA_FLAGS=$flags python bench/steps_per_call.py --rounds 3 --ks 1 100 \
                --cases lenet5-500 mlp-20 logistic-600 | grep -E "int8store|plain"
        done
        ;;
    4)  # where the runs differ and where they spend their time
        dumps=$(mktemp -d)
        echo "== the start: import jax, its GPU backend, the first transfer"
        python bench/gpu_start.py bigfirst
        # the held-whole and streamed runs' programs, compiled into one fresh
        # cache as a user's two runs would be (its autotuning results shared)
        for way in held streamed; do
            echo "== LeNet5, 2 epochs, $way, XLA's programs dumped"
            extra=(); [ $way = streamed ] && extra=(--max-device-bytes 16777216)
            XDG_CACHE_HOME=$dumps/cache XLA_FLAGS="--xla_dump_to=$dumps/$way" python \
                tutorials/convolutional_mlp.py --dataset $mnist --mode jax --epochs 2 \
                --save-model "" "${extra[@]}" | grep "validation error"
        done
        (cd bench && python gpu_programs.py "$dumps/held" "$dumps/streamed") | head -120
        echo "autotuning results JAX kept beside the programs:" \
            "$(find "$dumps/cache" -path "*autotune*" -type f | wc -l) files"
        # Is a fresh compilation deterministic, and do XLA's persisted autotuning
        # results (its documented way to deterministic compilation) make the
        # streamed run the held one? Each run its own fresh cache.
        short() {  # NAME XLA_FLAGS [TUTORIAL OPTIONS]: 3 epochs, its parameters kept
            local name=$1 flags=$2; shift 2
            XDG_CACHE_HOME=$dumps/$name XLA_FLAGS=$flags python tutorials/convolutional_mlp.py \
                --dataset $mnist --mode jax --epochs 3 --save-model "" \
                --checkpoint "$dumps/$name.npz" "$@" | grep "validation error" >"$dumps/$name.txt"
        }
        short heldA "--xla_gpu_dump_autotune_results_to=$dumps/autotune.textproto"
        short heldB ""
        short streamedC "--xla_gpu_load_autotune_results_from=$dumps/autotune.textproto" \
            --max-device-bytes 16777216
        (cd bench && python - "$dumps" <<'PY'
import sys
from pathlib import Path
from same_lines import parameters, same_bits
runs = Path(sys.argv[1])
names = ("heldA", "heldB", "streamedC")
ended = [name for name in names if (runs / f"{name}.npz").exists()]
if len(ended) < len(names):
    sys.exit(f"no parameters from {sorted(set(names) - set(ended))}: the run failed (above)")
lines = {name: (runs / f"{name}.txt").read_text() for name in names}
bits = {name: parameters(runs / f"{name}.npz") for name in names}
for name, what in (("heldB", "held, compiled afresh"),
                   ("streamedC", "streamed, held's autotuning results loaded")):
    print(f"{what}: lines {'same' if lines[name] == lines['heldA'] else 'DIFFERENT'}, "
          f"parameters {'same' if same_bits(bits[name], bits['heldA']) else 'DIFFERENT'}")
PY
        )
        echo "== the forms of LeNet5's convolutions (cuDNN's backward-data or forward)"
        python bench/conv_forms.py --rounds 5 --steps 100
        lenet5_with() {  # EPOCHS SETUP: the LeNet5 tutorial after the Python lines SETUP
            python - "$1" "$mnist" "$2" <<'PY' | grep -E "^(group|timings)"
import runpy, sys
epochs, mnist, setup = sys.argv[1:4]
exec(setup)  # (int8store's setting changed before the tutorial builds its functions)
sys.path.insert(0, "tutorials")  # (the tutorial imports logistic_sgd beside it)
sys.argv = ["tutorials/convolutional_mlp.py", "--dataset", mnist, "--mode", "jax",
            "--epochs", epochs, "--timings", "--save-model", ""]
runpy.run_path(sys.argv[0], run_name="__main__")
PY
        }
        log_groups='import int8store.backend.jax.direct as direct
chosen = direct.scoring_group
def logged(*arguments):
    group = chosen(*arguments)
    print("group", group, "windows a step of the scoring loop")
    return group
direct.scoring_group = logged'
        for bytes in 1 268435456 1073741824 8589934592; do
            echo "== LeNet5, 10 epochs, scoring groups of at most $bytes bytes"
            lenet5_with 10 "import int8store.backend.jax.window_groups as window_groups
window_groups.GROUP_BYTES = $bytes
$log_groups"
        done
        # The whole tutorial in both forms of the forward convolutions' turned
        # kernel (int8store/backend/jax/kernel_turn.py): each form's programs
        # made by a 1-epoch run first, then 20 epochs each, in the order ABBA.
        turn() {  # FORM EPOCHS: the tutorial with the turn folded or apart
            local apart=False; [ "$1" = apart ] && apart=True
            lenet5_with "$2" "import int8store.backend.jax.kernel_turn as kernel_turn
kernel_turn.TURN_APART_ON_GPU = $apart"
        }
        turn folded 1 >/dev/null; turn apart 1 >/dev/null
        for form in folded apart apart folded; do
            echo "== LeNet5, 20 epochs, the forward kernel's turn $form"
            turn $form 20
        done
        profiled() {  # TUTORIAL SORT LINES: 20 epochs of it under cProfile, its top LINES
            python -m cProfile -s "$2" "tutorials/$1" --dataset $mnist --mode jax --epochs 20 \
                --save-model "" --timings >"$dumps/profile.txt"
            grep -E "^timings|ran for" "$dumps/profile.txt"
            grep -A "$3" "Ordered by" "$dumps/profile.txt"
        }
        echo "== the logistic tutorial, 20 epochs, a warm cache, under cProfile"
        python tutorials/logistic_sgd.py --dataset $mnist --mode jax --epochs 20 --save-model "" >/dev/null
        profiled logistic_sgd.py cumtime 40
        echo "== LeNet5, 20 epochs, a warm cache, under cProfile: its own time"
        profiled convolutional_mlp.py tottime 30
        ;;
    5)  # JAX's memory pool (three quarters of the GPU, taken at the first transfer)
        python tutorials/logistic_sgd.py --dataset $mnist --mode jax --save-model "" >/dev/null  # (cache warm)
        for round in 1 2; do
            for pool in true false; do
                for way in serial overlap bigfirst; do
                    echo "pool $pool: $(XLA_PYTHON_CLIENT_PREALLOCATE=$pool python bench/gpu_start.py $way)"
                done
                /usr/bin/time -f "pool $pool: the logistic tutorial whole, a warm cache, %e s" \
                    env XLA_PYTHON_CLIENT_PREALLOCATE=$pool python tutorials/logistic_sgd.py \
                    --dataset $mnist --mode jax --save-model "" --timings 2>&1 | grep -E "pool|timings"
            done
        done
        ;;
    esac
} 2>&1 | tee "$out"
