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
    ("nesyseq", "nesyseq.common", "nesyseq.triton_kernels", "hydra_plugins"),
    ("nesyseq.data_prep",),
    ("nesyseq.plugins",),
    ("nesyseq.user_dir", "nesyseq.evaluations"),
    ("nesyseq.slurm", "nesyseq.hub", "nesyseq.converters"),
    ("nesyseq.cli",),
]
FLOOR = {pkg: i for i, names in enumerate(FLOORS) for pkg in names}
# the one import up the floors: the package root's ``nesyseq.load`` hands over to the API, lazily
FACADES = {("nesyseq", "nesyseq.hub")}


def package_dirs():
    """setup.cfg's package_dir: installed package name -> the repository folder it is built from."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    lines = [ln.strip() for ln in cfg["options"]["package_dir"].splitlines() if ln.strip()]
    return dict((k.strip(), v.strip()) for k, v in (ln.split("=", 1) for ln in lines))


def installed_packages():
    """The packages setup.cfg maps that hold Python modules (configs/ holds only yaml)."""
    return {name for name, folder in package_dirs().items() if any((REPO / folder).rglob("*.py"))}


def floor_of(module: str) -> str:
    """The FLOORS entry a module belongs to: the longest one that prefixes it."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in FLOOR:
            return ".".join(parts[:n])
    raise KeyError(module)


def project_modules(root=REPO):
    """{module name: path} for every .py file of the installed packages, named as installed."""
    mods = {}
    for pkg, folder in sorted(package_dirs().items()):
        base = (root / folder).resolve()
        for path in sorted(base.rglob("*.py")):
            parts = list(path.resolve().relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join([pkg] + parts)] = path
    return mods


def imports_of_tree(name: str, path: Path, tree, known) -> set:
    """The project modules that ``tree`` (a parsed module, or one import statement of it) imports."""
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


def imports_of(name: str, path: Path, known) -> set:
    """The project modules that ``name`` imports (absolute or relative, at any depth)."""
    return imports_of_tree(name, path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), known)


def import_graph(root=REPO):
    mods = project_modules(root)
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def floor_violations(graph):
    bad = []
    for src, targets in graph.items():
        top = floor_of(src)
        for dst in sorted(targets):
            other = floor_of(dst)
            if (src, other) in FACADES:
                continue
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
    # nesyseq.cli, nesyseq.common and nesyseq.hub live inside the nesyseq/ folder: floors of their own
    assert installed_packages() | {"nesyseq.cli", "nesyseq.common", "nesyseq.hub"} == set(FLOOR), (
        "put each package of setup.cfg's package_dir on one floor of FLOORS (and docs/architecture.md)")


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


# ----------------------------------------------------------------------------- rooms inside plugins/
# plugins/ is organised by fairseq registry kind (docs/architecture.md): each register_* call sits
# in the sub-package of its kind, model files share code through shared modules only (no private
# names, no lazy imports).

ROOMS = {"register_model": "models", "register_model_architecture": "models", "register_task": "tasks",
         "register_criterion": "criterions", "register_optimizer": "optim",
         "register_lr_scheduler": "lr_scheduler", "register_bpe": "encoders", "register_tokenizer": "encoders"}
# the registry kinds, plus data (the datasets tasks build) and patches (the fixes of fairseq bugs
# that user_dir applies)
PLUGIN_KINDS = {"models", "layers", "tasks", "criterions", "optim", "lr_scheduler", "encoders", "data", "patches"}


def registrations(path: Path) -> set:
    """The fairseq register_* functions that ``path`` calls (as a decorator or directly)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in ROOMS:
                found.add(name)
    return found


def misplaced_registrations(mods):
    bad = []
    for name, path in sorted(mods.items()):
        parts = name.split(".")
        if parts[:2] != ["nesyseq", "plugins"]:
            continue
        room = parts[2] if len(parts) > 3 else None
        for reg in sorted(registrations(path)):
            if room != ROOMS[reg]:
                bad.append(f"{name} calls {reg}: it belongs in plugins/{ROOMS[reg]}/")
    return bad


def sideways_imports(mods):
    """Imports inside plugins/ that reach into another module's private
    names, that happen inside a function (lazy, e.g. round a cycle), or that go from one model
    file to another (a model file registers a model; what two share lives in a shared module)."""
    model_files = {n for n, p in mods.items() if n.startswith("nesyseq.plugins.models.") and
                   registrations(p) & {"register_model"}}
    bad = []
    for name, path in sorted(mods.items()):
        if not name.startswith("nesyseq.plugins."):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        lazy = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = imports_of_tree(name, path, node, mods)
            if not targets:
                continue
            if id(node) in lazy:
                bad.append(f"{name}:{node.lineno} imports {sorted(targets)} inside a function")
            if isinstance(node, ast.ImportFrom):
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__version__"]
                if private:
                    bad.append(f"{name}:{node.lineno} takes private {private} from {sorted(targets)}")
            if name in model_files:
                other = sorted(t for t in targets if t in model_files)
                if other:
                    bad.append(f"{name}:{node.lineno} imports the model file(s) {other}")
    return bad


def test_plugins_subpackages_are_registry_kinds():
    subs = {p.name for p in (REPO / "plugins").iterdir() if (p / "__init__.py").is_file()}
    assert subs <= PLUGIN_KINDS, f"plugins/ sub-packages beyond the registry kinds: {sorted(subs - PLUGIN_KINDS)}"


def test_every_registration_sits_in_the_room_of_its_kind():
    assert misplaced_registrations(project_modules()) == []


def test_no_sideways_imports_between_plugin_modules():
    assert sideways_imports(project_modules()) == []


def test_the_room_checks_see_a_misplaced_or_sideways_module(tmp_path):
    """The checks fail on the layouts this one replaced (issue 60): an optimizer registered in a
    task file, a model taking another model file's private class, a lazy import round a cycle."""
    root = tmp_path
    files = {
        "plugins/__init__.py": "",
        "plugins/tasks/__init__.py": "",
        "plugins/tasks/pairs.py": "from fairseq.optim import register_optimizer\n"
                                  "@register_optimizer('x')\nclass X: pass\n",
        "plugins/models/__init__.py": "",
        "plugins/models/a.py": "from fairseq.models import register_model\n"
                               "class _Base: pass\n@register_model('a')\nclass A(_Base): pass\n",
        "plugins/models/b.py": "from fairseq.models import register_model\n"
                               "from nesyseq.plugins.models.a import _Base\n@register_model('b')\nclass B(_Base): pass\n",
        "plugins/models/c.py": "def f():\n    from nesyseq.plugins.models.shared import g  # avoid an import cycle\n",
        "plugins/models/shared.py": "def g(): pass\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    mods = {}
    for rel in files:
        parts = list(Path(rel).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(["nesyseq"] + parts)] = root / rel
    assert misplaced_registrations(mods) == [
        "nesyseq.plugins.tasks.pairs calls register_optimizer: it belongs in plugins/optim/"]
    assert sideways_imports(mods) == [
        "nesyseq.plugins.models.b:2 takes private ['_Base'] from ['nesyseq.plugins.models.a']",
        "nesyseq.plugins.models.b:2 imports the model file(s) ['nesyseq.plugins.models.a']",
        "nesyseq.plugins.models.c:2 imports ['nesyseq.plugins.models.shared'] inside a function",
    ]
