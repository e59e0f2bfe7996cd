"""The drop-in, judged as users have the classic tutorials: clients written in
their style (tests/clients/), the library imported first (Aesara, or PyTensor
on that backend), floatX float64 and float32 (PyTensor: float64),
``x.get_value()`` for batch counts and predictions, data in ``../data/``
beside the client. Each runs in a fresh process with its own loader and with
``from int8store import load_data`` in its place; the figures must agree.
Also: importing int8store and loading changes nothing outside the package."""

import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from archives import fake_mnist, python2_pickle, write_mnist_idx_folder
from conftest import ROOT
from int8store.backend import chosen_backend

# Every test here runs its code in a subprocess with flags of its own.
pytestmark = pytest.mark.own_flags

LIBRARY = chosen_backend()
FLAGS = f"{LIBRARY.upper()}_FLAGS"

CLIENTS = ROOT / "tests" / "clients"


def learnable_mnist(n=(400, 100, 100), seed=0):
    """A small mnist.pkl.gz-shaped dataset: 28x28 float32 images of k/256 with
    a class-dependent pattern, int64 labels, as the classic file holds them."""
    rng = np.random.default_rng(seed)
    prototypes = rng.integers(0, 256, (10, 784))
    splits = []
    for count in n:
        labels = rng.integers(0, 10, count)
        noise = rng.integers(-60, 61, (count, 784))
        levels = np.clip(prototypes[labels] + noise, 0, 255)
        splits.append(((levels / 256).astype(np.float32), labels.astype(np.int64)))
    return tuple(splits)


@pytest.fixture(scope="module")
def classic_layout(tmp_path_factory):
    return make_classic_layout(tmp_path_factory.mktemp("tutorials"))


def make_classic_layout(root):
    """``code/CLIENT.py`` and ``data/mnist.pkl.gz`` beside it, and a working
    folder elsewhere, in ``root``, as the classic tutorials were laid out."""
    (root / "code").mkdir()
    (root / "data").mkdir()
    (root / "elsewhere").mkdir()
    for client in CLIENTS.glob("classic_*.py"):
        shutil.copy(client, root / "code" / client.name)
    # A Python 2 protocol-2 pickle, as the deeplearning.net file is.
    (root / "data" / "mnist.pkl.gz").write_bytes(gzip.compress(python2_pickle(learnable_mnist())))
    return root


def run_client(layout, name, loader, floatx, *args):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AESARA", "PYTENSOR", "INT8STORE"))}
    env[FLAGS] = f"floatX={floatx}"
    env["INT8STORE_OFFLINE"] = "1"  # the data must be found where the classic looked
    done = subprocess.run([sys.executable, str(layout / "code" / name), "--loader", loader,
                           "--library", LIBRARY, *args],
                          cwd=layout / "elsewhere", env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    if LIBRARY == "aesara" and startup_hook_installed():
        # no false "BLAS not found" at the start, whoever loads the data
        # (Aesara's true warnings about the client's own code may remain)
        assert "blas" not in done.stderr.lower(), done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# Both floatX on Aesara, where the drop-in is judged; on PyTensor its default,
# float64 (its float32 graphs are the in-process tests' floatX in the first
# run). A client's first run on PyTensor compiles its graph in Numba: about
# 40 s a process with an empty cache, which CI always has.
CLIENT_FLOATX = ["float64", "float32"] if LIBRARY == "aesara" else ["float64"]


@pytest.mark.slow
@pytest.mark.parametrize("floatx", CLIENT_FLOATX)
def test_a_classic_logistic_client_gives_the_classic_figures(classic_layout, floatx):
    if LIBRARY == "pytensor":
        # A program PyTensor's Numba mode compiles into an empty cache gives
        # costs a unit in the last place off those of the same program run
        # from its cache (0.059589824355322625 and ...2262, the classic loader
        # both times): each client runs from the cache the first one fills.
        run_client(classic_layout, "classic_logistic.py", "classic", floatx, "--epochs", "3")
    classic = run_client(classic_layout, "classic_logistic.py", "classic", floatx, "--epochs", "3")
    ours = run_client(classic_layout, "classic_logistic.py", "int8store", floatx, "--epochs", "3")
    assert ours["floatX"] == classic["floatX"] == floatx
    assert ours["x_dtype"] == classic["x_dtype"] == floatx  # get_value() as the classic held it
    assert ours["batches"] == classic["batches"] == [8, 2, 2]
    assert len(ours["labels"]) > 1 and sum(ours["labels"]) >= 2 * 50  # (2 test batches of 50)
    # The same figures, bit for bit: the int8 view holds exactly the values
    # the float copy held, and the graph around it compiles as the classic's
    # (the widening an op of its own, the minibatch's length not in its type).
    for key in ("valid_errors", "test_error", "predicted", "labels", "last_costs"):
        assert ours[key] == classic[key], key
    np.testing.assert_array_equal(ours["W"], classic["W"])
    assert ours["valid_errors"][-1] < 0.5  # it learned (chance is 0.9)
    assert ours["flags"] == f"floatX={floatx}"  # the environment as it was


@pytest.mark.slow
@pytest.mark.aesara  # the classic LeNet5 imports Aesara's own conv2d and pooling
def test_a_classic_lenet5_client_under_float64(classic_layout):
    classic = run_client(classic_layout, "classic_lenet.py", "classic", "float64")
    ours = run_client(classic_layout, "classic_lenet.py", "int8store", "float64")
    assert ours["floatX"] == "float64" and "CorrMM" in ours["ops"]
    assert ours["batches"] == classic["batches"] == [16, 4]
    assert ours["costs"] == classic["costs"]
    assert ours["test_error"] == classic["test_error"]


def python(code, env_extra=None, cwd=None, quiet=False):
    """The lines ``code`` prints, run in a fresh interpreter without the
    library's flags (``quiet``: it must print nothing on stderr either)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AESARA", "PYTENSOR"))}
    env.update(env_extra or {})
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (quiet and done.stderr), done.stderr[-3000:]
    return done.stdout.strip().splitlines()


@pytest.mark.parametrize("flags", [None, "floatX=float32"])
def test_importing_and_loading_leave_the_environment_as_it_was(flags):
    code = ("import os, sys, int8store\n"
            f"print({LIBRARY!r} in sys.modules)\n"
            "int8store.load_data('digits')\n"
            f"print(os.environ.get({FLAGS!r}))\n"
            f"import {LIBRARY} as lib; print(bool(lib.config.blas__ldflags))")
    lines = python(code, {FLAGS: flags} if flags else None)
    assert lines[-3:] == ["False", str(flags), "True"]


@pytest.mark.aesara
def test_aesara_imported_first_still_gets_blas_and_the_corrmm_fix():
    code = ("import aesara, aesara.tensor as T\n"
            "print(repr(aesara.config.blas__ldflags))\n"
            "from int8store import load_data\n"
            "load_data('digits')\n"
            "from aesara.tensor.nnet import conv2d\n"
            "x, w = T.tensor4(), T.tensor4()\n"
            "f = aesara.function([x, w], conv2d(x, w))\n"
            "print(sorted({type(n.op).__name__ for n in f.maker.fgraph.toposort()}))\n"
            "print('scipy_openblas' in aesara.config.blas__ldflags)")
    if startup_hook_installed():
        # scripts/setup.sh's environment: the import itself got the BLAS, and
        # numpy's false "no BLAS found" warnings were never printed
        lines = python(code, quiet=True)
        assert "scipy_openblas" in lines[-3]
    elif importlib.util.find_spec("numpy.distutils"):
        lines = python(code)
        assert lines[-3] == "''"  # Aesara found no BLAS by itself
    else:
        pytest.skip("Python 3.12 without the start-up hook: Aesara cannot be imported first")
    assert "CorrMM" in lines[-2] and lines[-1] == "True"


def startup_hook_installed():
    """Whether this environment has the start-up hook that scripts/setup.sh
    installs for the Aesara stack (int8store/backend/aesara_startup.py)."""
    return (Path(sysconfig.get_paths()["purelib"]) / "int8store-aesara-blas.pth").is_file()


@pytest.mark.parametrize("library_first", [True, False])
def test_a_blas_the_user_chose_wins(library_first):
    code = (f"import {LIBRARY}\n" if library_first else "") + (
        "import int8store\nint8store.load_data('digits')\n"
        f"import {LIBRARY} as lib\nprint(repr(lib.config.blas__ldflags))")
    assert python(code, {FLAGS: "blas__ldflags="})[-1] == "''"


def test_the_aesara_start_up_hook_imports_nothing_before_the_program_runs():
    """The hook scripts/setup.sh installs (int8store/backend/aesara_startup.py)
    runs in every interpreter of the Aesara environment, before the
    program's first line: until the program imports Aesara, it imports
    neither numpy nor a graph library. With numpy imported by then, a
    program that sets OPENBLAS_NUM_THREADS before its own ``import numpy``,
    as many do, got numpy's BLAS on every core, and each start took 0.15 s."""
    code = ("import sys\n"
            "before = sorted(m for m in ('numpy', 'aesara', 'pytensor') if m in sys.modules)\n"
            "from int8store.backend import aesara_startup\n"
            "aesara_startup.install()\n"
            "print(before, sorted(m for m in ('numpy', 'aesara', 'pytensor', 'jax') "
            "if m in sys.modules))")
    assert python(code)[-1] == "[] []"


def test_an_environment_of_ones_own_gets_the_start_up_hook_from_one_command(tmp_path):
    """``pip install int8store[aesara]`` installs no start-up hook, and on
    Python 3.12 a classic tutorial then stops at ``import aesara``, whatever
    its loader. ``python -m int8store.backend.setup.aesara_hook`` writes the file
    scripts/setup.sh writes; an interpreter that reads it waits for its first
    ``import aesara`` with the hook in place."""
    site = tmp_path / "site-packages"
    site.mkdir()
    done = subprocess.run([sys.executable, "-m", "int8store.backend.setup.aesara_hook",
                           "--site", str(site)], capture_output=True, text=True, timeout=120)
    # (quiet where the hook runs already: run as aesara_startup, a module the
    # hook had imported, it was runpy's RuntimeWarning on every setup.sh rerun)
    assert done.returncode == 0 and not done.stderr, done.stderr[-3000:]
    assert str(site / "int8store-aesara-blas.pth") in done.stdout
    # A fresh interpreter that has only that folder as a site folder (-S: not
    # this environment's, whose own hook may be there already).
    code = ("import site, sys\n"
            f"site.addsitedir({str(site)!r})\n"
            "print([type(f).__name__ for f in sys.meta_path\n"
            "       if type(f).__module__ == 'int8store.backend.aesara_startup'])")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shown = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 0 and not shown.stderr, shown.stderr[-3000:]
    assert shown.stdout.split() == ["['_BlasForAesara']"]


def test_convert_info_verify_never_import_a_graph_library(tmp_path):
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
    out = tmp_path / "s.h5"
    code = ("import sys\nfrom int8store.cli import main\n"
            f"assert main(['convert', {str(folder)!r}, '-o', {str(out)!r}]) == 0\n"
            f"assert main(['info', {str(out)!r}]) == 0\n"
            f"assert main(['verify', {str(out)!r}]) == 0\n"
            "print(sorted(m for m in ('aesara', 'pytensor', 'jax', 'scipy_openblas32') "
            "if m in sys.modules))")
    assert python(code)[-1] == "[]"
