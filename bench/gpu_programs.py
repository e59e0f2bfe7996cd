"""What XLA's autotuner chose for the steps of two runs, side by side: each
GEMM and cuDNN call of the training programs' loop body, and whether the
two runs' programs chose the same (the same algorithm, the same values).

On a GPU a run held whole and the same run streamed compile different
programs (the data's shape, the loop's trip count), each autotuned on its
own; where the choices differ the two runs' bits may too. Each DUMP is the
folder a run wrote with ``XLA_FLAGS=--xla_dump_to=DUMP`` (its programs
compiled, not loaded from the cache: ``bench/gpu_check.sh 4`` gives each
pair a fresh cache).

    python bench/gpu_programs.py DUMP_A DUMP_B
"""

import argparse
import collections
import re
from pathlib import Path

from hlo_kernels import step_kernels, tuned_thunks

#: the compiled training programs, by the name XLA's dump gives them
PROGRAM = re.compile(r"\.jit_(int8store_(?:full_)?steps)\..*after_optimizations\.txt$")


def programs(folder):
    """``{name: text}`` of the training programs compiled for a GPU in a
    dump folder (the last of a name, if it was compiled more than once)."""
    found = {}
    for path in sorted(Path(folder).iterdir()):
        match = PROGRAM.search(path.name)
        if match:
            found[match.group(1)] = path.read_text()
    if not found:
        raise SystemExit(f"{folder}: no training program in the dump (int8store_*steps after "
                         "optimizations); was it compiled, not loaded from a cache?")
    if not any(tuned_thunks(text) for text in found.values()):
        raise SystemExit(f"{folder}: no GEMM or cuDNN call in its training programs' steps: "
                         "compiled for a CPU, not a GPU?")
    return found


def compare(name_a, text_a, name_b, text_b):
    """Print how two programs' steps were tuned; return the count that differ."""
    thunks_a, thunks_b = tuned_thunks(text_a), tuned_thunks(text_b)
    kinds_a, trips_a = step_kernels(text_a)
    kinds_b, trips_b = step_kernels(text_b)
    print(f"== {name_a} ({trips_a} trips) against {name_b} ({trips_b} trips)")
    print(f"kernels a step: {dict(kinds_a)} against {dict(kinds_b)}")
    by_what = collections.defaultdict(list)
    for kind, what, tuned in thunks_b:
        by_what[kind, what].append(tuned)
    differ = 0
    for kind, what, tuned in thunks_a:
        others = by_what.get((kind, what))
        other = others.pop(0) if others else None
        same = "same" if other == tuned else ("absent" if other is None else "DIFFERENT")
        differ += same != "same"
        print(f"{kind:5} {same:9} {what}")
        if same == "DIFFERENT":
            print(f"      A: {tuned}\n      B: {other}")
    left = sum(len(v) for v in by_what.values())
    if left:
        print(f"(and {left} GEMM or cuDNN calls only B's step has)")
    return differ + left


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="the first run's XLA dump folder (e.g. held whole)")
    parser.add_argument("b", help="the second run's (e.g. streamed)")
    args = parser.parse_args(argv)
    found_a, found_b = programs(args.a), programs(args.b)
    differ = 0
    for name_a, text_a in found_a.items():
        for name_b, text_b in found_b.items():
            differ += compare(f"A {name_a}", text_a, f"B {name_b}", text_b)
    print(f"{differ} GEMM or cuDNN calls tuned differently or not in both")


if __name__ == "__main__":
    main()
