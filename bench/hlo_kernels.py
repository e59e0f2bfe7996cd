"""The kernels a step of a compiled XLA program launches, read from the
program's text (``compiled.as_text()``): for a program with a loop, the
loop's body, and the trip count XLA knows for it (a GPU loop that does not
know it asks the host after each trip); else the whole program. Thunks are
counted by kind: fusions, GEMMs (a library call or a Triton GEMM fusion),
cuDNN calls, copies, others. Used by ``bench/gpu_kernels.py``; and what a
step's GEMMs and cuDNN calls were tuned to (:func:`tuned_thunks`), by
``bench/gpu_programs.py``.
"""

import collections
import json
import re

__all__ = ["KINDS", "computations", "launches", "step_kernels", "step_lines", "tuned_thunks"]

KINDS = ("fusion", "GEMM", "cuDNN", "copy", "other")
#: the instructions of a compiled program that launch nothing
NOT_LAUNCHED = {"parameter", "get-tuple-element", "tuple", "bitcast", "constant"}


def computations(text):
    """``{name: [instruction lines]}`` of a compiled HLO module's text
    (the entry computation also under ``"ENTRY"``)."""
    found, lines = {}, None
    for line in text.splitlines():
        header = re.match(r"^(ENTRY )?%(\S+) .*\{$", line)
        if header:
            lines = found[header.group(2)] = []
            if header.group(1):
                found["ENTRY"] = lines
        elif line.startswith("}"):
            lines = None
        elif lines is not None:
            lines.append(re.sub(r"/\*[^*]*\*/", "", line.strip()))  # (no /*index=5*/ comments)
    return found


def _opcode(line):
    match = re.match(r"(?:ROOT )?%\S+ = (?:\([^)]*\)|\S+) ([a-z-]+)\(", line)
    return match.group(1) if match else None


def _kind(line, opcode):
    if opcode == "fusion":
        return "GEMM" if re.search(r'"kind":"__triton(_nested)?_gemm', line) else "fusion"
    if opcode == "custom-call":
        target = re.search(r'custom_call_target="([^"]+)"', line).group(1).lower()
        if "cudnn" in target:
            return "cuDNN"
        return "GEMM" if "gemm" in target or "blas" in target else "other"
    return opcode if opcode in KINDS else "other"


def launches(lines):
    """The thunks of a computation's instruction ``lines``, by kind."""
    counted = collections.Counter()
    for line in lines:
        opcode = _opcode(line)
        if opcode is not None and opcode not in NOT_LAUNCHED:
            counted[_kind(line, opcode)] += 1
    return counted


def step_lines(text):
    """``(instruction lines, trip count)`` of a step of the compiled program
    ``text``: the loop's body if the program has one loop (its trip count
    as XLA knows it, or None), else the whole program (and None)."""
    found = computations(text)
    loops = [line for line in found["ENTRY"] if _opcode(line) == "while"]
    if not loops:
        return found["ENTRY"], None
    if len(loops) > 1:
        raise ValueError(f"{len(loops)} loops in the program: expected one or none")
    body = re.search(r"body=%([^,\s]+)", loops[0]).group(1)
    trips = re.search(r'"known_trip_count":\{"n":"(\d+)"', loops[0])
    return found[body], int(trips.group(1)) if trips else None


def step_kernels(text):
    """``(kernels by kind, trip count)`` of a step of the compiled program
    ``text`` (see :func:`step_lines`)."""
    lines, trips = step_lines(text)
    return launches(lines), trips


#: backend_config keys that say when a thunk runs, not what it computes
SCHEDULING = ("operation_queue_id", "wait_on_operation_queues", "force_earliest_schedule")


def tuned_thunks(text):
    """The GEMMs and cuDNN calls of a step of the compiled program ``text``,
    in order, each ``(kind, what, tuned)``: ``what`` its result type and
    attributes (names, operands and metadata left out: the same call in
    two programs reads the same), ``tuned`` its backend config (what the
    autotuner chose: a cuDNN algorithm, a cuBLAS algorithm, a Triton
    tiling) without the keys that only schedule it."""
    found = []
    for line in step_lines(text)[0]:
        opcode = _opcode(line)
        kind = opcode and _kind(line, opcode)
        if kind not in ("GEMM", "cuDNN"):
            continue
        config = re.search(r"backend_config=(\{.*\})", line)
        try:
            tuned = json.loads(config.group(1)) if config else {}
        except json.JSONDecodeError:  # (not JSON: compared as written)
            tuned = {"text": config.group(1)}
        for key in SCHEDULING:
            tuned.pop(key, None)
        head = re.sub(r"metadata=\{[^}]*\}", "", line[:config.start()] if config else line)
        parts = re.match(r"(?:ROOT )?%\S+ = (\([^)]*\)|\S+) ([a-z-]+)\([^)]*\)(.*)", head)
        attributes = [item.strip() for item in parts.group(3).split(", ")
                      if item.strip() and not item.strip().startswith("calls=")]
        what = " ".join([parts.group(1), parts.group(2)] + attributes)
        found.append((kind, what, json.dumps(tuned, sort_keys=True)))
    return found
