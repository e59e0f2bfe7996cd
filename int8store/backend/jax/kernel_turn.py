"""The turned kernel of a true convolution, in the form a GPU may run faster.

Theano's conv2d, which the classic LeNet5 calls, is a true convolution: the
kernel turned half-way round (``kern[:, :, ::-1, ::-1]``), then correlated,
which is what ``jax.lax.conv_general_dilated`` computes. Compiling for a GPU,
XLA folds the turn into the convolution and calls cuDNN's backward-data
convolution (``__cudnn$convBackwardInput``) for the forward pass; behind
``jax.lax.optimization_barrier`` the turn stays a small kernel of its own
and the forward pass is cuDNN's forward convolution (seen in programs
compiled for an H100 without one, ``bench/gpu_kernels.py``). cuDNN's
transposed convolutions have run slower than its forward ones on CUDA
(jax-ml/jax#23783); which form is faster for LeNet5's layers is for
``bench/conv_forms.py`` and ``bench/gpu_check.sh 4`` to measure on a GPU.
Until then :data:`TURN_APART_ON_GPU` is off and the form is the one measured
so far. Only the forward convolution's kernel is turned here: its gradients
are XLA's backward passes already. The values are the same either way (the
same products and sums; cuDNN's algorithm, which XLA picks, may round
otherwise).
"""

import jax

from .target import target_platform

__all__ = ["TURN_APART_ON_GPU", "turned"]

#: Whether the forward convolution's turned kernel is kept apart (behind an
#: optimization barrier) in programs made for a GPU.
TURN_APART_ON_GPU = False


def turned(kern, forward=False):
    """``kern`` (filters, channels, rows, columns) turned half-way round in
    its two spatial axes: for a ``forward`` convolution, kept apart from it
    in programs made for a GPU when :data:`TURN_APART_ON_GPU` says so."""
    kern = kern[:, :, ::-1, ::-1]
    if forward and TURN_APART_ON_GPU and target_platform() == "gpu":
        return jax.lax.optimization_barrier(kern)
    return kern
