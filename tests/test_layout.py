"""The package's folders follow its spine, and imports only point down it.

The spine, from the bottom: errors and the runtime every part leans on; what
codes mean; which example goes where (order: arithmetic, no graph library);
what augmentation does to a minibatch (augment: arithmetic too); the graph
library (backend); the store; the readers (sources);
the planning step; memory; the shared dataset and its symbolic views;
streaming; the one loading road; the training loop's tools; then the commands at the top (converter, preview, cli) and the
public API (``int8store/__init__.py``). A module may import from its own
part or from any part below it, never above: a test, so it stays so.

``backend/`` is one part with rooms (setup, then ops, then jax): each of its
modules lives in a room (but for the door, ``backend/__init__.py``, and the
start-up hook environments name by its path), and a room imports only from
itself and the rooms before it, never from the door.

No module of the package imports, even inside a function, one that imports
it in turn, directly or through others: no import cycle anywhere.
"""

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.graph_free

PACKAGE = Path(__file__).resolve().parent.parent / "int8store"
SPINE = ["errors", "runtime", "codes", "order", "augment", "backend", "store", "sources", "plan", "memory",
         "dataset", "streaming", "loading", "training", "converter", "preview", "cli", "__main__",
         "parallel", "nnet", "__init__"]
SUBPACKAGES = ["runtime", "codes", "order", "augment", "backend", "store", "sources", "plan", "memory", "dataset",
               "streaming", "training"]
#: backend's rooms, in the order they may import each other.
BACKEND_ROOMS = ["setup", "ops", "jax"]
#: What lies beside them: the door, and the start-up hook that scripts/setup.sh
#: names by its module path in environments set up earlier.
BESIDE_THE_DOOR = ["__init__", "aesara_startup"]


def modules(package=PACKAGE):
    """``(path, parts)`` of every module of ``package`` (a folder),
    ``parts`` its dotted name split (a package's ``__init__`` included)."""
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        yield path, parts


def module_name(parts):
    """The dotted name Python gives a module (a package's, for its ``__init__``)."""
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(dotted):
    """The spine part an absolute module name belongs to."""
    names = dotted.split(".")
    return names[1] if len(names) > 1 else "__init__"


def imports(path, parts, known=None):
    """``(line, module)`` for each int8store module imported anywhere in the
    module at ``path`` (inside functions too), ``import_module`` of a
    literal name included. ``from package import name`` imports the module
    ``package.name`` when ``known`` (the names of the package's modules)
    holds it, else ``package`` itself."""
    known = known if known is not None else {module_name(p) for _, p in modules()}
    package = parts[:-1]  # a module's own package; a package's __init__ is in itself
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[:len(package) - node.level + 1])
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "int8store" or target.startswith("int8store."):
                for alias in node.names:
                    inner = f"{target}.{alias.name}"
                    yield node.lineno, inner if inner in known else target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("int8store."):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) \
                == "import_module" and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            name = node.args[0].value
            if name.startswith("."):  # relative to the anchor: __name__ or __package__
                by_name = len(node.args) > 1 and getattr(node.args[1], "id", None) == "__name__"
                anchor = module_name(parts).split(".") if by_name else list(package)
                level = len(name) - len(name.lstrip("."))
                name = ".".join(anchor[:len(anchor) - level + 1] + [name.lstrip(".")])
            if name.startswith("int8store"):
                yield node.lineno, name


def import_graph(package=PACKAGE):
    """``{module: {module it imports: first line}}`` for every module of ``package``."""
    found = list(modules(package))
    known = {module_name(parts) for _, parts in found}
    graph = {}
    for path, parts in found:
        edges = graph.setdefault(module_name(parts), {})
        for line, target in imports(path, parts, known):
            edges.setdefault(target, line)
    return graph


def cycles(graph):
    """The import cycles of ``graph``: each strongly connected set of two or
    more modules (or one that imports itself), sorted (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1 or node in graph.get(node, {}):
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_every_module_belongs_to_a_part_of_the_spine():
    strays = [str(path) for path, parts in modules() if part_of(".".join(parts)) not in SPINE]
    assert strays == []


def test_imports_only_point_down_the_spine():
    upward = []
    for path, parts in modules():
        here = SPINE.index(part_of(".".join(parts)))
        for line, target in imports(path, parts):
            if SPINE.index(part_of(target)) > here:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert upward == []


def test_every_import_names_a_module_that_exists():
    graph = import_graph()
    missing = [f"{module} imports {target}" for module, edges in graph.items()
               for target in edges if target not in graph]
    assert missing == []


def test_no_import_cycle_anywhere():
    graph = import_graph()
    found = cycles(graph)
    assert found == [], "; ".join(" -> ".join(cycle) for cycle in found)


def test_each_subpackage_says_what_it_owns_and_may_import():
    for name in SUBPACKAGES:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        assert doc and "May import:" in doc, name
        allowed = doc.split("May import:")[1]
        for other in SPINE[SPINE.index(name) + 1:]:
            assert f"int8store.{other}`" not in allowed and f"``{other}``" not in allowed, (name, other)


#: The most lines a module holds: one concept a module (STYLE.md; issue 45).
MOST_LINES = 500


def test_no_module_is_over_500_lines():
    long = [f"{path.relative_to(PACKAGE.parent)}: {len(path.read_text().splitlines())} lines"
            for path, _ in modules() if len(path.read_text().splitlines()) > MOST_LINES]
    assert long == []


def backend_modules():
    return [(path, parts) for path, parts in modules() if parts[:2] == ("int8store", "backend")]


def test_backend_modules_live_in_its_rooms():
    backend = PACKAGE / "backend"
    strays = [str(path.relative_to(PACKAGE.parent)) for path, parts in backend_modules()
              if not (len(parts) == 4 and parts[2] in BACKEND_ROOMS)
              and not (len(parts) == 3 and parts[2] in BESIDE_THE_DOOR)]
    assert strays == []
    assert sorted(p.name for p in backend.iterdir() if p.is_dir() and p.name != "__pycache__") \
        == sorted(BACKEND_ROOMS)


def room_of(dotted):
    """``backend``'s room of an absolute module name, ``"door"`` for
    ``int8store.backend`` itself, None outside ``backend``."""
    names = dotted.split(".")
    if names[:2] != ["int8store", "backend"]:
        return None
    return names[2] if len(names) > 2 else "door"


def test_backend_rooms_import_only_themselves_and_the_rooms_before_them():
    wrong = []
    for path, parts in backend_modules():
        here = room_of(module_name(parts))
        if here not in BACKEND_ROOMS:
            continue  # the door (and the hook beside it) may import any room
        allowed = BACKEND_ROOMS[:BACKEND_ROOMS.index(here) + 1]
        for line, target in imports(path, parts):
            there = room_of(target)
            if there is not None and there not in allowed:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert wrong == []


def test_each_room_says_what_it_owns_and_may_import():
    for room in BACKEND_ROOMS:
        doc = ast.get_docstring(ast.parse((PACKAGE / "backend" / room / "__init__.py").read_text()))
        assert doc and "May import:" in doc, room
        allowed = doc.split("May import:")[1]
        for later in BACKEND_ROOMS[BACKEND_ROOMS.index(room) + 1:]:
            assert f"int8store.backend.{later}`" not in allowed, (room, later)
        for above in SPINE[SPINE.index("backend") + 1:]:
            assert f"int8store.{above}`" not in allowed, (room, above)


def test_the_check_sees_an_upward_import(tmp_path):
    """The checker itself: an import from above, inside a function, is found."""
    module = tmp_path / "int8store" / "codes" / "x.py"
    module.parent.mkdir(parents=True)
    module.write_text("def f():\n    from ..dataset.shared import SharedDataset\n")
    found = list(imports(module, ("int8store", "codes", "x")))
    assert found == [(2, "int8store.dataset.shared")]
    assert SPINE.index(part_of(found[0][1])) > SPINE.index("codes")


def test_the_check_sees_a_cycle_through_a_function_and_a_package(tmp_path):
    """The cycle detector itself: ``a`` imports ``b.c`` (as ``from .b import
    c``); ``b.c`` imports ``a`` inside a function, ``d`` by ``import_module``;
    ``d`` imports nothing back. One cycle, ``a`` and ``b.c``."""
    root = tmp_path / "int8store"
    (root / "b").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "b" / "__init__.py").write_text("")
    (root / "a.py").write_text("from .b import c\n")
    (root / "b" / "c.py").write_text("from importlib import import_module\n\n"
                                     "def later():\n    from .. import a\n"
                                     "    return import_module('..d', __package__)\n")
    (root / "d.py").write_text("import json\n")
    graph = import_graph(root)
    assert graph["int8store.a"] == {"int8store.b.c": 1}
    assert graph["int8store.b.c"] == {"int8store.a": 4, "int8store.d": 5}
    assert cycles(graph) == [["int8store.a", "int8store.b.c"]]
    del graph["int8store.b.c"]["int8store.a"]
    assert cycles(graph) == []


def test_a_name_that_moved_warns_with_the_release_the_readme_gives():
    # the warning said "the next release", the README "until 0.4"
    import warnings

    import int8store
    from int8store.runtime.exports import MOVED_NAMES_GO_IN

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        moved = int8store.steps_function
    assert [str(w.message) for w in caught] == [
        "int8store.steps_function is now int8store.training.steps_function; the old name goes "
        f"in {MOVED_NAMES_GO_IN}"]
    assert caught[0].category is DeprecationWarning and caught[0].filename == __file__
    from int8store.training import steps_function

    assert moved is steps_function
    readme = (PACKAGE.parent / "README.md").read_text()
    assert f"still work until {MOVED_NAMES_GO_IN}," in " ".join(readme.split())


def test_the_layout_page_names_every_module_script_and_benchmark():
    # it said "module by module" and had left nine modules out
    page = (PACKAGE.parent / "docs" / "layout.md").read_text()
    named = set(re.findall(r"[\w.]+\.(?:py|sh)\b", page))
    files = [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]
    files += [p for folder in ("bench", "scripts") for p in (PACKAGE.parent / folder).iterdir()
              if p.suffix in (".py", ".sh")]
    missing = sorted(str(p.relative_to(PACKAGE.parent)) for p in files
                     if p.name not in named and p.name != "__init__.py")
    assert missing == []
