"""The package's folders follow its spine, and imports only point down it.

The spine, from the bottom: errors and the runtime every part leans on; what
codes mean; which example goes where (order: arithmetic, no graph library);
the graph library (backend); the store; the readers (sources);
the planning step; memory; the shared dataset and its symbolic views;
streaming; then the commands at the top (converter, preview, cli) and the
public API (``int8store/__init__.py``). A module may import from its own
part or from any part below it, never above: a test, so it stays so.
"""

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.graph_free

PACKAGE = Path(__file__).resolve().parent.parent / "int8store"
SPINE = ["errors", "runtime", "codes", "order", "backend", "store", "sources", "plan", "memory",
         "dataset", "streaming", "converter", "preview", "cli", "__init__"]
SUBPACKAGES = ["runtime", "codes", "order", "backend", "store", "sources", "plan", "memory", "dataset",
               "streaming"]


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        yield path, parts


def part_of(dotted):
    """The spine part an absolute module name belongs to."""
    names = dotted.split(".")
    return names[1] if len(names) > 1 else "__init__"


def imports(path, parts):
    """Absolute int8store module names imported anywhere in the module
    (inside functions too)."""
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[:len(package) - node.level + 1])
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "int8store":  # from int8store import x: x may be a part
                for alias in node.names:
                    yield node.lineno, f"int8store.{alias.name}" if alias.name in SPINE else target
            elif target.startswith("int8store."):
                yield node.lineno, target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("int8store."):
                    yield node.lineno, alias.name


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


def test_each_subpackage_says_what_it_owns_and_may_import():
    for name in SUBPACKAGES:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        assert doc and "May import:" in doc, name
        allowed = doc.split("May import:")[1]
        for other in SPINE[SPINE.index(name) + 1:]:
            assert f"int8store.{other}`" not in allowed and f"``{other}``" not in allowed, (name, other)


def test_the_check_sees_an_upward_import(tmp_path):
    """The checker itself: an import from above, inside a function, is found."""
    module = tmp_path / "int8store" / "codes" / "x.py"
    module.parent.mkdir(parents=True)
    module.write_text("def f():\n    from ..dataset.loading import load_data\n")
    found = list(imports(module, ("int8store", "codes", "x")))
    assert found == [(2, "int8store.dataset.loading")]
    assert SPINE.index(part_of(found[0][1])) > SPINE.index("codes")
