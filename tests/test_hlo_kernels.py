"""bench/hlo_kernels.py, which bench/gpu_kernels.py counts a GPU program's
kernels with: its reading of XLA's compiled text, on a GPU program's lines
written out here and on programs this JAX compiles for the CPU."""

import importlib.util
import json
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from gpu_programs import main as compare_programs  # noqa: E402
from hlo_kernels import computations, launches, step_kernels, tuned_thunks  # noqa: E402

has_jax = importlib.util.find_spec("jax") is not None

# A loop as XLA prints it for an H100 (abridged): a Triton GEMM, a cuDNN call,
# a copy, two fusions, and a tuple type with an /*index=5*/ comment.
# (The cuDNN call's algorithm as the autotuner writes it.)
GPU_PROGRAM = """\
HloModule jit_steps

%body (arg: (s32[], f32[8], f32[8,8], f32[4], f32[4], /*index=5*/f32[4])) -> (s32[], f32[8]) {
  %arg = (s32[], f32[8]{0}, f32[8,8]{1,0}, f32[4]{0}, f32[4]{0}, /*index=5*/f32[4]{0}) parameter(0)
  %gte.0 = s32[] get-tuple-element(%arg), index=0
  %gte.1 = f32[8,8]{1,0} get-tuple-element(%arg), index=2
  %gemm_fusion_dot.1 = f32[8,8]{1,0} fusion(%gte.1, %gte.1), kind=kCustom, calls=%g, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion"}}
  %cudnn-conv.1 = (f32[8,8]{1,0}, u8[0]{0}) custom-call(%gte.1, %gte.1), window={size=5x5}, custom_call_target="__cudnn$convForward", metadata={op_name="jit(steps)/conv" stack_frame_id=3}, backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"cudnn_conv_backend_config":{"algorithm":{"algo_id":"1","math_type":"DEFAULT_MATH"}}}
  %copy.3 = f32[8,8]{1,0} copy(%gemm_fusion_dot.1)
  %bitcast.2 = f32[64]{0} bitcast(%copy.3)
  %loop_add_fusion = s32[] fusion(%gte.0), kind=kLoop, calls=%add
  %fusion.7 = (f32[8]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=5*/f32[4]{0}) fusion(%bitcast.2), kind=kLoop, calls=%f
  ROOT %tuple.9 = (s32[], f32[8]{0}) tuple(%loop_add_fusion, %fusion.7)
}

ENTRY %main (p: f32[8,8]) -> f32[8] {
  %p = f32[8,8]{1,0} parameter(0)
  %while.1 = (s32[], f32[8]{0}, f32[8,8]{1,0}, f32[4]{0}, f32[4]{0}, /*index=5*/f32[4]{0}) while(%tuple), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"100"},"known_init_step":{"init":"0","step":"1"}}
  ROOT %gte.9 = f32[8]{0} get-tuple-element(%while.1), index=1
}
"""


def test_a_gpu_loop_body_is_counted_by_kind_with_its_trip_count():
    kinds, trips = step_kernels(GPU_PROGRAM)
    assert trips == 100
    assert dict(kinds) == {"GEMM": 1, "cuDNN": 1, "copy": 1, "fusion": 2}
    assert set(computations(GPU_PROGRAM)) == {"body", "main", "ENTRY"}


def test_a_loop_of_unknown_trip_count_and_a_program_without_a_loop():
    unknown = GPU_PROGRAM.replace('"known_trip_count":{"n":"100"},', "")
    assert step_kernels(unknown)[1] is None
    entry_only = GPU_PROGRAM.split("\nENTRY")[0].replace("%body (", "ENTRY %body (")
    kinds, trips = step_kernels(entry_only)
    assert trips is None and sum(kinds.values()) == 5
    with pytest.raises(ValueError, match="2 loops"):
        step_kernels(GPU_PROGRAM.replace("  ROOT %gte.9", "  %while.2 = f32[8]{0} while(%t), "
                                         "condition=%cond, body=%body\n  ROOT %gte.9"))


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_programs_this_jax_compiles_are_read():
    """A loop of 7 trips, one of a trip count known only at run time, and
    a program of one fusion, as this JAX's XLA compiles them for the CPU."""
    import jax
    import jax.numpy as jnp

    x = jnp.ones((8, 8))

    def body(i, x):
        return jnp.tanh(x @ x) + i

    fixed = jax.jit(lambda x: jax.lax.fori_loop(0, 7, body, x)).lower(x).compile()
    kinds, trips = step_kernels(fixed.as_text())
    assert trips == 7 and sum(kinds.values()) >= 1
    varying = jax.jit(lambda x, n: jax.lax.fori_loop(0, n, body, x)).lower(x, 3).compile()
    assert step_kernels(varying.as_text())[1] is None
    single = jax.jit(lambda x: jnp.tanh(x) + 1).lower(x).compile()
    assert step_kernels(single.as_text()) == (launches(computations(single.as_text())["ENTRY"]),
                                              None)
    assert dict(step_kernels(single.as_text())[0]) == {"fusion": 1}


CONV = ('(f32[8,8]{1,0}, u8[0]{0}) custom-call window={size=5x5} '
        'custom_call_target="__cudnn$convForward"')


def tuned_as(algorithm, queue="0", name="cudnn-conv.1"):
    """GPU_PROGRAM with its convolution tuned to ``algorithm`` (renamed,
    on another queue: what does not change what it computes)."""
    return (GPU_PROGRAM.replace('"algo_id":"1"', f'"algo_id":"{algorithm}"')
            .replace('"operation_queue_id":"0"', f'"operation_queue_id":"{queue}"')
            .replace("%cudnn-conv.1 =", f"%{name} ="))


def test_what_a_step_was_tuned_to():
    """Each GEMM and cuDNN call of the step, with what the autotuner chose
    and nothing that only names or schedules it."""
    thunks = tuned_thunks(GPU_PROGRAM)
    assert [kind for kind, _, _ in thunks] == ["GEMM", "cuDNN"]
    assert thunks[0] == ("GEMM", "f32[8,8]{1,0} fusion kind=kCustom",
                         '{"fusion_backend_config": {"kind": "__triton_nested_gemm_fusion"}}')
    kind, what, tuned = thunks[1]
    assert what == CONV
    assert json.loads(tuned) == {"cudnn_conv_backend_config": {
        "algorithm": {"algo_id": "1", "math_type": "DEFAULT_MATH"}}}
    assert tuned_thunks(tuned_as("1", queue="3", name="cudnn-conv.9")) == thunks
    other = tuned_thunks(tuned_as("7"))[1]
    assert other[1] == what and other[2] != tuned


def test_two_runs_programs_are_compared_call_by_call(tmp_path, capsys):
    """bench/gpu_programs.py on two dumps: the calls tuned alike and those
    not; a dump of CPU programs, or of no training program, is refused."""
    name = "module_0004.jit_int8store_full_steps.sm_9.0_gpu_after_optimizations.txt"
    for folder, algorithm in (("held", "1"), ("streamed", "7")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text(tuned_as(algorithm))
    compare_programs([str(tmp_path / "held"), str(tmp_path / "streamed")])
    printed = capsys.readouterr().out
    assert "GEMM  same      f32[8,8]{1,0} fusion kind=kCustom" in printed
    assert f"cuDNN DIFFERENT {CONV}" in printed
    assert '"algo_id": "7"' in printed
    assert printed.endswith("1 GEMM or cuDNN calls tuned differently or not in both\n")
    cpu_program = "\n".join(line for line in GPU_PROGRAM.splitlines()
                             if "gemm_fusion" not in line and "cudnn" not in line)
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / name.replace("sm_9.0_gpu", "cpu")).write_text(cpu_program)
    with pytest.raises(SystemExit, match="cpu: no GEMM or cuDNN call"):
        compare_programs([str(tmp_path / "held"), str(tmp_path / "cpu")])
    with pytest.raises(SystemExit, match="no training program in the dump"):
        compare_programs([str(tmp_path / "held"), str(tmp_path)])
