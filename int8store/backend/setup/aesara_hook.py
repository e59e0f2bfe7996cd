"""``python -m int8store.backend.setup.aesara_hook``: write the start-up hook of
:mod:`int8store.backend.aesara_startup` into this environment (what
``scripts/setup.sh`` runs). Not in that module: the hook imports it at
every start of the interpreter, and ``python -m`` of a module already
imported warns (runpy's RuntimeWarning)."""

import os
import sys

__all__ = ["write_hook", "main", "HOOK_FILE", "HOOK_LINE"]

#: The start-up file and its one line, which ``site`` runs at every start-up
#: of the environment's interpreter (a line that begins with ``import``).
HOOK_FILE = "int8store-aesara-blas.pth"
HOOK_LINE = ('import importlib.util as u; u.find_spec("int8store") and '
             '__import__("int8store.backend.aesara_startup", fromlist=["install"]).install()')


def write_hook(site=None):
    """Write the start-up file into ``site`` (default: this interpreter's
    ``site-packages``), replacing one there, atomically; returns its path."""
    import sysconfig
    import tempfile

    folder = site if site is not None else sysconfig.get_paths()["purelib"]
    path = os.path.join(folder, HOOK_FILE)
    handle, temporary = tempfile.mkstemp(prefix=f".{HOOK_FILE}.", dir=folder)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(HOOK_LINE + "\n")
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    return path


def main(argv=None):
    """``python -m int8store.backend.setup.aesara_hook [--site DIR]``: write the hook."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m int8store.backend.setup.aesara_hook",
        description="Give `import aesara` int8store's BLAS in this environment (see "
                    "int8store/backend/aesara_startup.py): writes " + HOOK_FILE + ".")
    parser.add_argument("--site", help="the folder to write it in (default: this "
                                       "interpreter's site-packages)")
    args = parser.parse_args(argv)
    try:
        path = write_hook(args.site)
    except OSError as error:
        print(f"error: cannot write {HOOK_FILE} in {args.site or 'site-packages'}: {error}",
              file=sys.stderr)
        return 2
    print(f"{path}: `import aesara` gets int8store's BLAS in this environment")
    return 0


if __name__ == "__main__":
    sys.exit(main())
