"""The packages stand on floors (docs/architecture.md): a module may import its own package
and the floors below it, never a floor above or beside it, and no two modules import each
other, directly or round a longer loop.

The graph is read from the source with ``ast`` (every ``import`` statement, the lazy ones
inside functions included), so it sees what a run might import, not only what one
collection happened to import.
"""
import ast
import configparser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Bottom first.  A package may import the packages on lower floors only.
FLOORS = [
    ("nesyseq.common", "triton_kernels", "hydra_plugins"),
    ("data_prep",),
    ("plugins",),
    ("user_dir", "evaluations"),
    ("slurm",),
    ("nesyseq.cli",),
]
FLOOR = {pkg: i for i, names in enumerate(FLOORS) for pkg in names}


def installed_packages():
    """The top-level packages setup.cfg installs (its packages.find include list)."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    names = cfg["options.packages.find"]["include"].split()
    return {n for n in names if "." not in n and "*" not in n}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root=REPO):
    """{module name: path} for every .py file of the installed packages."""
    mods = {}
    for pkg in sorted(installed_packages()):
        for path in sorted((root / pkg).rglob("*.py")):
            mods[module_name(path)] = path
    return mods


def imports_of(name: str, path: Path, known) -> set:
    """The project modules that ``name`` imports (absolute or relative, at any depth)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # ``from pkg import mod`` imports the module pkg.mod when there is one
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for t in targets:
            # the longest known module that t names (``import a.b.c`` imports a.b.c)
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def import_graph(root=REPO):
    mods = project_modules(root)
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def floor_violations(graph):
    bad = []
    for src, targets in graph.items():
        top = src.split(".")[0]
        for dst in sorted(targets):
            other = dst.split(".")[0]
            if other != top and FLOOR[other] >= FLOOR[top]:
                bad.append(f"{src} (floor {FLOOR[top]}) imports {dst} (floor {FLOOR[other]})")
    return bad


def cycles(graph):
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_installed_package_has_a_floor():
    assert installed_packages() == set(FLOOR), (
        "put each package of setup.cfg's include list on one floor of FLOORS (and docs/architecture.md)")


def test_imports_go_down_the_floors():
    assert floor_violations(import_graph()) == []


def test_no_module_import_cycles():
    assert cycles(import_graph()) == []


def test_the_checks_see_a_reintroduced_knot():
    """The checks fail on the knots this layout untied (issue 25): data_prep importing the
    CLI package, and math_eval <-> math_compare."""
    graph = {k: set(v) for k, v in import_graph().items()}
    assert "nesyseq.cli.main" in graph and "nesyseq.evaluations.math_compare" in graph["nesyseq.evaluations.math_eval"]
    knotted = {k: set(v) for k, v in graph.items()}
    knotted["nesyseq.data_prep.wmt_prepare"].add("nesyseq.cli.main")
    assert floor_violations(knotted) == ["nesyseq.data_prep.wmt_prepare (floor 1) imports nesyseq.cli.main (floor 5)"]
    knotted = {k: set(v) for k, v in graph.items()}
    knotted["nesyseq.evaluations.math_compare"].add("nesyseq.evaluations.math_eval")
    assert ["nesyseq.evaluations.math_compare", "nesyseq.evaluations.math_eval"] in cycles(knotted)


@pytest.mark.parametrize("source,expected", [
    ("import nesyseq.cli.main\n", {"nesyseq.cli.main"}),
    ("def f():\n    from nesyseq.cli import main\n", {"nesyseq.cli.main"}),
    ("from ..evaluations import math_eval\n", {"nesyseq.evaluations.math_eval"}),
    ("from . import wmt_prepare\n", {"nesyseq.data_prep.wmt_prepare"}),
    ("from nesyseq.common.errors import UserError\n", {"nesyseq.common.errors"}),
    ("import os, torch\n", set()),
])
def test_imports_are_read_from_the_source(tmp_path, source, expected):
    """Absolute, lazy (inside a function), relative and ``from pkg import module`` imports."""
    known = set(project_modules())
    path = tmp_path / "data_prep" / "probe.py"
    path.parent.mkdir()
    path.write_text(source)
    assert imports_of("nesyseq.data_prep.probe", path, known) == expected
