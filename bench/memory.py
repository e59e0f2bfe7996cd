"""Memory: the images int8 against float32, and a model's training step,
estimated from its graph against XLA's figure and a measured C-backend peak.

    python bench/memory.py --dataset digits            # bytes of each split, int8 against float32
    python bench/memory.py --models                    # the step estimate checked against reality
    python bench/memory.py --models --batch-sizes 100 500 2000
    python bench/memory.py --models --image-shapes 28x28 32x32x3

For the models (the tutorials' logistic regression, MLP and LeNet5, 10
classes, on MNIST's 28x28 grey images and on 32x32 colour ones by default),
each row sets side by side, for one batch size and image shape:

* the rule of thumb, ``(neurons x batch + parameters) x 2 x 4`` bytes;
* int8store's finer estimate (``int8store.memory.estimates.model_memory``): arguments
  + outputs + peak temporaries of the compiled step, from its graph, for JAX
  mode (the graph's order) and for the C backend (its virtual machine's order);
* XLA's own figure for the same step compiled in int8store's JAX mode
  for JAX's default device (``int8store.memory.estimates.xla_step_memory``:
  ``memory_analysis()``, arguments + outputs + temporaries - aliased), which
  ``int8store budget`` plans with on an accelerator;
* the measured peak of one step in int8store's C mode, in a fresh process:
  the arguments (allocated before), the scratch buffers int8store's
  convolutions keep between calls (PyTensor), and the peak of what
  tracemalloc sees allocated during a second call (numpy's and the
  library's C ops' arrays; not BLAS workspaces).
"""

import argparse
import itertools
import json
import subprocess
import sys


def data_table(dataset):
    from int8store import load_splits

    held = {storage: load_splits(dataset, storage=storage, dtype="float32")
            for storage in ("int8", "float")}
    print(f"dataset: {dataset}")
    print(f"{'split':6} {'examples':>9} {'int8 bytes':>14} {'float32 bytes':>15} {'ratio':>6}")
    for name, ds in held["int8"].items():
        int8 = ds.data.get_value(borrow=True).nbytes
        float32 = held["float"][name].data.get_value(borrow=True).nbytes
        print(f"{name:6} {ds.n_examples:>9,} {int8:>14,} {float32:>15,} {int8 / float32:>6.3f}")


def _arguments(graph, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    values = []
    for variable in graph.inputs:
        shape, dtype = variable.type.shape, variable.type.dtype
        if dtype == "int8":
            values.append(rng.integers(-128, 128, shape).astype(dtype))
        elif dtype.startswith("int"):
            values.append(rng.integers(0, 10, shape).astype(dtype))
        else:
            values.append((0.05 * rng.standard_normal(shape)).astype(dtype))
    return values


def measure_c(model, batch_size, image_shape):
    """Arguments + scratch kept between calls + traced peak of one C-backend
    step (run in a fresh process), in int8store's "c" mode, which the
    tutorials use (the library's default mode may be another: PyTensor's
    is Numba)."""
    import tracemalloc

    from int8store import function_mode
    from int8store.backend import activate

    api = activate()
    from int8store.memory.reference_models import build_step

    graph = build_step(model, batch_size, image_shape, 10)
    step = api.function(graph.inputs, graph.outputs, mode=function_mode("c"))
    arguments = _arguments(graph)
    step(*arguments)  # compiled and warmed: the scratch it keeps is counted below
    tracemalloc.start()
    step(*arguments)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return sum(a.nbytes for a in arguments) + _scratch_kept() + peak


def _scratch_kept():
    """Bytes of the scratch buffers int8store's own convolutions (PyTensor)
    keep from call to call, on this thread."""
    try:
        from int8store.backend.ops import im2col
    except ImportError:  # (Aesara's convolutions are its own)
        return 0
    return sum(buffer.nbytes for buffer in vars(im2col._scratch_buffers).values())


def model_table(batch_sizes, image_shapes):
    from int8store.memory.estimates import model_memory, xla_step_memory

    def mb(n):
        return f"{n / 2**20:.1f}"

    from int8store.backend import activate

    print(f"{activate().describe()}; the C-backend peak traced by tracemalloc")
    print("| model | images | batch | rule of thumb MiB | estimate, JAX MiB | XLA MiB "
          "| estimate / XLA | estimate, C MiB | C measured MiB | estimate / C |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model, shape, batch_size in itertools.product(("logistic", "mlp", "lenet5"),
                                                      image_shapes, batch_sizes):
        name = "x".join(map(str, shape))
        measured = json.loads(subprocess.run(
            [sys.executable, __file__, "--measure-c", model, str(batch_size), name],
            capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
        memory = model_memory(model, batch_size, shape, 10, mode="jax")
        in_c = model_memory(model, batch_size, shape, 10, mode="c")
        xla = xla_step_memory(model, batch_size, shape, 10).total
        print(f"| {model} | {name} | {batch_size} | {mb(memory.rule_of_thumb)} "
              f"| {mb(memory.estimate)} "
              f"| {mb(xla)} | {memory.estimate / xla:.2f} | {mb(in_c.estimate)} "
              f"| {mb(measured)} | {in_c.estimate / measured:.2f} |")


def _image_shape(text):
    return tuple(int(size) for size in text.split("x"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="digits", help="anything load_data takes")
    parser.add_argument("--models", action="store_true",
                        help="the step estimate against XLA and the C backend, not the data")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[100, 500, 2000])
    parser.add_argument("--image-shapes", type=_image_shape, nargs="+",
                        default=[(28, 28), (32, 32, 3)], help="HxW or HxWxC (default: %(default)s)")
    parser.add_argument("--measure-c", nargs=3, metavar=("MODEL", "BATCH", "SHAPE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure_c:
        model, batch_size, shape = args.measure_c
        print(json.dumps(measure_c(model, int(batch_size), _image_shape(shape))))
    elif args.models:
        model_table(args.batch_sizes, args.image_shapes)
    else:
        data_table(args.dataset)


if __name__ == "__main__":
    main()
