"""The layering of docs/architecture.md, checked on the source (AST, nothing imported).

* ``openkb/`` is the domain: it imports no web, CLI or queue framework and none of the adapters
  (``cli``, ``server``, ``workers``) — not at module level, not inside a function.
* Modules of ``openkb`` import each other without cycles (module-level imports; an import inside
  a function is how a cycle gets hidden, not how it gets fixed, but it is not a load-order
  hazard, so it is left to review).
* The adapters wire their parts with plain imports: no ``optional_module``, no
  ``importlib.import_module``/``__import__`` (a missing router must fail the start, visibly).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_DOMAIN = ("fastapi", "starlette", "typer", "click", "huey", "uvicorn", "cli", "server", "workers")
ADAPTERS = ("cli", "server", "workers")


@dataclass(frozen=True)
class Import:
    module: str  # absolute dotted name of what is imported ("" for a bare relative import)
    names: tuple[str, ...]
    line: int
    top_level: bool  # executed when the module is imported (not inside a def/class body)
    type_checking: bool  # under ``if TYPE_CHECKING:`` (never executed)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_files(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, root: Path = ROOT) -> Iterator[Import]:
    """Every import statement of a file, absolute, with where it sits."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    mod = module_name(path, root)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]

    def resolve(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        return ".".join(base + ([node.module] if node.module else []))

    def walk(node: ast.AST, top: bool, tc: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(alias.name, (), child.lineno, top, tc)
            elif isinstance(child, ast.ImportFrom):
                yield Import(resolve(child), tuple(a.name for a in child.names), child.lineno, top, tc)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from walk(child, False, tc)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), top, True)
                for stmt in child.orelse:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), top, tc)
            else:
                # class bodies run at import time; so do module-level if/try/with blocks
                yield from walk(child, top, tc)

    yield from walk(tree, True, False)


def _top_package(name: str) -> str:
    return name.split(".", 1)[0]


# --- 1. the domain imports no framework and no adapter -------------------------------------------


def test_domain_imports_no_framework_or_adapter() -> None:
    offences = []
    for path in package_files("openkb"):
        for imp in imports_of(path):
            if _top_package(imp.module) in FORBIDDEN_IN_DOMAIN:
                where = "module level" if imp.top_level else "inside a function"
                offences.append(f"{path.relative_to(ROOT)}:{imp.line} imports {imp.module} ({where})")
    assert not offences, "openkb/ must not import frameworks or adapters (docs/architecture.md):\n" + "\n".join(
        offences
    )


# --- 2. no import cycles inside openkb -----------------------------------------------------------


def domain_graph() -> dict[str, set[str]]:
    """Module -> the ``openkb`` modules it imports at module level (TYPE_CHECKING excluded).

    ``from openkb.a import b`` points at ``openkb.a.b`` when that is a module, else at ``openkb.a``.
    """
    files = package_files("openkb")
    modules = {module_name(p) for p in files}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for path in files:
        src = module_name(path)
        for imp in imports_of(path):
            if not imp.top_level or imp.type_checking or _top_package(imp.module) != "openkb":
                continue
            targets = {f"{imp.module}.{n}" for n in imp.names if f"{imp.module}.{n}" in modules}
            if len(targets) < len(imp.names) or not imp.names:
                targets.add(imp.module)
            graph[src] |= {t for t in targets if t in modules and t != src}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One concrete cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    sccs: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:  # recursive: depth is bounded by the package's few hundred modules
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
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
                sccs.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return [_a_cycle(graph, set(comp), comp[0]) for comp in sccs]


def _a_cycle(graph: dict[str, set[str]], comp: set[str], start: str) -> list[str]:
    """A shortest path start -> ... -> start inside one component (breadth first)."""
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [start, *reversed(path[:-1]), start] if v != start else [start, start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return sorted(comp)


def test_cycle_finder_finds_a_planted_cycle() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(g) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_domain_modules_import_each_other_without_cycles() -> None:
    found = cycles(domain_graph())
    assert not found, "import cycles among openkb modules (module level):\n" + "\n".join(" -> ".join(c) for c in found)


# --- 3. adapters wire their parts with plain imports ---------------------------------------------


def dynamic_imports(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("importlib", "openkb.runtime"):
            for a in node.names:
                if a.name in ("import_module", "optional_module"):
                    yield f"{path.relative_to(ROOT)}:{node.lineno} imports {a.name}"
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in ("import_module", "optional_module", "__import__"):
                yield f"{path.relative_to(ROOT)}:{node.lineno} calls {name}()"


def test_adapters_use_plain_imports() -> None:
    offences = [o for pkg in ADAPTERS for p in package_files(pkg) for o in dynamic_imports(p)]
    assert not offences, "load routers, commands and job handlers with plain imports:\n" + "\n".join(offences)


def test_the_scanner_sees_imports_inside_functions_and_skips_type_checking(tmp_path: Path) -> None:
    probe = tmp_path / "openkb" / "sub" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "from typing import TYPE_CHECKING\nimport openkb.errors\nfrom ..jobs import set_queue\n"
        "if TYPE_CHECKING:\n    import fastapi\n"
        "class C:\n    from openkb import db\n"
        "def f():\n    from server import app\n"
    )
    found = {(i.module, i.top_level, i.type_checking) for i in imports_of(probe, root=tmp_path)}
    assert found == {
        ("typing", True, False),
        ("openkb.errors", True, False),
        ("openkb.jobs", True, False),
        ("fastapi", True, True),
        ("openkb", True, False),
        ("server", False, False),
    }
