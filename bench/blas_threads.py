"""The environment of a benchmark's fresh process for one BLAS thread
setting: "default" is OpenBLAS's own choice, whatever the caller exported
(a shell with OPENBLAS_NUM_THREADS=1 made both of a table's rows one thread);
any other value is set."""

import os

#: What a "default" row leaves to OpenBLAS.
_BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OPENBLAS_THREAD_TIMEOUT", "OMP_NUM_THREADS",
                   "GOTO_NUM_THREADS")


def blas_environment(threads="default", base=None, **settings):
    """``base`` (default ``os.environ``) without the BLAS thread variables,
    then ``OPENBLAS_NUM_THREADS=threads`` unless ``"default"``, and
    ``settings`` (other variables, e.g. ``OPENBLAS_THREAD_TIMEOUT="4"``)."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k not in _BLAS_VARIABLES}
    if threads != "default":
        env["OPENBLAS_NUM_THREADS"] = str(threads)
    env.update(settings)
    return env
