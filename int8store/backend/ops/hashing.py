"""The 32-bit finaliser of :func:`int8store.order.shuffle.mix` in C, for the
ops that hash counters (:mod:`.permutation`, :mod:`.augment`): written from
its steps, so nothing of it is copied by hand, and in a module of its own,
so that an op that hashes does not import the other (a JAX-mode stream
imports no C op it does not use)."""

from ...order.shuffle import MIX_STEPS

__all__ = ["c_mix"]


def c_mix():
    """``static inline npy_uint32 int8store_mix(npy_uint32 x)``: the
    finaliser's steps, for an op's ``c_support_code``."""
    steps = []
    for shift, multiplier in MIX_STEPS:
        steps.append(f"x ^= x >> {shift};")
        if multiplier is not None:
            steps.append(f"x *= 0x{multiplier:08X}u;")
    return ("static inline npy_uint32 int8store_mix(npy_uint32 x)\n{\n    "
            + "\n    ".join(steps) + "\n    return x;\n}\n")
