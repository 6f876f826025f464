"""The modules of ``openkb.content`` import each other one way only (no cycle, lazy imports
inside functions included), and none of them re-implements an access decision.

``revert`` drives ``workspaces``, ``knowledge_bases``, ``documents`` and ``sharing``; they must
not import ``revert`` back (the errors a revert raises live in ``openkb/errors.py``). A cycle
hidden in a function-level import still makes the modules one unit that cannot be understood,
tested or loaded alone, so function-level imports count here too.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "openkb" / "content"


def content_imports() -> dict[str, set[str]]:
    """module -> the ``openkb.content`` modules it imports (anywhere in the file)."""
    mods = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for m in sorted(mods):
        deps: set[str] = set()
        for node in ast.walk(ast.parse((PACKAGE / f"{m}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "openkb.content":
                    deps |= {a.name for a in node.names if a.name in mods}
                elif node.module.startswith("openkb.content."):
                    deps.add(node.module.split(".")[2])
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[2] for a in node.names if a.name.startswith("openkb.content.")}
        graph[m] = deps - {m}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d) :] + [d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_content_modules_import_one_way() -> None:
    graph = content_imports()
    assert {"workspaces", "knowledge_bases", "documents", "sharing"} <= graph["revert"]
    assert find_cycle(graph) is None, f"import cycle in openkb.content: {' -> '.join(find_cycle(graph) or [])}"


def test_the_cycle_finder_finds_the_old_circle() -> None:
    # before: knowledge_bases -> workspaces, and both imported revert (for RevertConflict) inside
    # a function while revert imported them
    old = {
        "revert": {"knowledge_bases", "workspaces"},
        "knowledge_bases": {"workspaces", "revert"},
        "workspaces": {"revert"},
    }
    assert find_cycle(old) is not None
    assert (
        find_cycle(
            {"revert": {"knowledge_bases", "workspaces"}, "knowledge_bases": {"workspaces"}, "workspaces": set()}
        )
        is None
    )
