"""Only ``openkb/permissions`` fetches-then-authorizes: a hand-written copy in the content
services or an adapter fails this test.

The permission service owns every access decision (docs/permissions.md): services and adapters
call ``access_workspace`` / ``access_knowledge_base`` / ``access_document`` / ``access_tree`` /
``access_change``, which fetch, decide and raise ``NotFound`` for missing and unseen alike. This
test reads the source (``ast``, no imports) of ``openkb`` (all but ``openkb/permissions``),
``server``, ``cli`` and ``workers`` and reports, per function:

* **fetch + decide**: a by-id fetch of a workspace, knowledge base or document
  (``session.get(Document, ...)``, ``select(Document).where(Document.id == ...)``) in the same
  function as a permission decision (``can_*``, ``*_capabilities``, ``filter_documents``,
  ``resolve_*_role``, ``tree_access``, ``authorize``, ``load_snapshot``, ``rules.*``);
* **hand-checked capabilities**: an ``if`` that tests an ``Action``/``KbAction``/``WsAction``
  against a set of capabilities (``Action.EDIT not in caps``, ``caps & {Action.READ, ...}``)
  and raises — the decision ``DocumentAccess.require`` already makes;
* **a local access function**: ``def access_*`` in ``openkb/content``, ``server``, ``cli`` or
  ``workers`` (other packages name ``access_*`` the same contract for their own objects:
  ``access_asset``, ``access_group``, ``access_key``...).

Kept precise on purpose: listing queries (``select(KnowledgeBase).where(tenant == ...)`` then a
batch decision), existence checks without a decision (``session.get(Document, id) is None``
before ``access_document``), and ``can_*`` answers used for a multi-object question
(``can_move_document``) are not findings. ``test_the_guard_*`` prove both directions on small
snippets, so the guard cannot silently go blind.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("openkb", "server", "cli", "workers")
NOT_SCANNED = ("openkb/permissions/",)
NO_LOCAL_ACCESS = ("openkb/content/", "server/", "cli/", "workers/")
GUARDED_MODELS = {"Document", "KnowledgeBase", "Workspace"}
ACTION_ENUMS = {"Action", "KbAction", "WsAction"}
DECISIONS = {
    "document_capabilities",
    "knowledge_base_capabilities",
    "filter_documents",
    "filter_readable_documents",
    "document_roles",
    "resolve_workspace_role",
    "resolve_effective_role",
    "tree_access",
    "readable_tree",
    "authorize",
    "load_snapshot",
    "load_kb_snapshot",
    "can",
}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _own_nodes(fn: ast.AST):
    """The nodes of a function's body, not descending into nested functions or classes."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _is_model_id(node: ast.AST) -> bool:
    """``Document.id`` or ``col(Document.id)``."""
    if isinstance(node, ast.Call) and _name(node.func) == "col" and node.args:
        node = node.args[0]
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "id"
        and isinstance(node.value, ast.Name)
        and node.value.id in GUARDED_MODELS
    )


def _fetches_by_id(node: ast.AST) -> bool:
    if (
        isinstance(node, ast.Call)
        and _name(node.func) == "get"
        and isinstance(node.func, ast.Attribute)
        and node.args
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id in GUARDED_MODELS
    ):
        return True  # session.get(Document, ...)
    # select(Document).where(Document.id == ...), but not a join condition (Document.id == Asset.document_id)
    return (
        isinstance(node, ast.Compare)
        and _is_model_id(node.left)
        and any(isinstance(op, ast.Eq) for op in node.ops)
        and not all(_is_column(c) for c in node.comparators)
    )


def _is_column(node: ast.AST) -> bool:
    """``Model.field`` or ``col(Model.field)``: the other side of a join, not an id value."""
    if isinstance(node, ast.Call) and _name(node.func) == "col" and node.args:
        node = node.args[0]
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id[:1].isupper()


def _decides(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "rules"
    name = _name(node.func)
    return name is not None and (name in DECISIONS or name.startswith("can_"))


def _is_action(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ACTION_ENUMS


def _checks_capabilities(test: ast.AST) -> bool:
    for node in ast.walk(test):
        if (
            isinstance(node, ast.Compare)
            and _is_action(node.left)
            and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
        ):
            return True  # Action.EDIT not in caps
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.BitAnd)
            and any(
                isinstance(side, ast.Set) and any(_is_action(e) for e in side.elts) for side in (node.left, node.right)
            )
        ):
            return True  # caps & {Action.READ, Action.TRASH}
    return False


def findings(source: str, where: str = "<snippet>", *, local_access: bool = True) -> list[str]:
    """``local_access``: also report ``def access_*``."""
    tree = ast.parse(source)
    out: list[str] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        at = f"{where}:{fn.lineno} {fn.name}()"
        if local_access and fn.name.startswith("access_"):
            out.append(f"{at}: defines its own access_* function (use openkb.permissions')")
        nodes = list(_own_nodes(fn))
        if any(_fetches_by_id(n) for n in nodes) and any(_decides(n) for n in nodes):
            out.append(
                f"{at}: fetches a workspace/knowledge base/document by id and decides access itself "
                "(use access_workspace / access_knowledge_base / access_document)"
            )
        for n in nodes:
            if (
                isinstance(n, ast.If)
                and _checks_capabilities(n.test)
                and any(isinstance(b, ast.Raise) for s in n.body for b in ast.walk(s))
            ):
                out.append(
                    f"{where}:{n.lineno} {fn.name}(): raises on a hand-checked capability set "
                    "(use the access object's require())"
                )
    return out


def test_no_hand_written_fetch_then_authorize_outside_permissions() -> None:
    found: list[str] = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(NOT_SCANNED):
                continue
            found += findings(path.read_text(encoding="utf-8"), rel, local_access=rel.startswith(NO_LOCAL_ACCESS))
    assert not found, "hand-written access decisions outside openkb/permissions:\n" + "\n".join(found)


# -- the guard itself ------------------------------------------------------------------------------

# the copies this guard was written to keep out (as they were before access_* existed)
_OLD_COPIES = {
    "kb_or_404": """
def _kb_or_404(session, principal, kb_id):
    kb = session.get(KnowledgeBase, kb_id)
    if kb is None or not can_read_knowledge_base(session, principal, kb_id):
        raise NotFound("knowledge base not found")
    return kb
""",
    "workspace": """
def get_ws(session, principal, workspace_id):
    role = resolve_workspace_role(session, principal, workspace_id)
    ws = session.get(Workspace, workspace_id) if role else None
    if ws is None or role is None:
        raise NotFound("workspace not found")
    return ws, role
""",
    "capabilities_then_get": """
def trashed(session, principal, doc_id):
    caps = document_capabilities(session, principal, [doc_id]).get(doc_id, frozenset())
    doc = session.get(Document, doc_id) if caps & {Action.READ, Action.TRASH} else None
    return doc
""",
    "decision_alone": """
def check(session, principal, doc_id, action):
    caps = document_capabilities(session, principal, [doc_id]).get(doc_id, frozenset())
    if action not in caps and Action.READ not in caps:
        raise PermissionDenied("no")
""",
    "select_by_id": """
def load(session, principal, kb_id):
    kb = session.exec(select(KnowledgeBase).where(col(KnowledgeBase.id) == kb_id)).first()
    if not knowledge_base_capabilities(session, principal, [kb_id])[kb_id]:
        raise NotFound("knowledge base not found")
""",
    "authorize_then_get": """
def delete_empty(session, actor, kb_id):
    authorize(session, actor.principal, ObjectRef("knowledge_base", kb_id), "transfer_owner")
    kb = session.get(KnowledgeBase, kb_id)
""",
    "local_access": """
def access_thing(session, principal, thing_id):
    return None
""",
}

# legitimate shapes the guard must leave alone
_LEGIT = {
    "listing": """
def list_kbs(session, principal, tenant):
    kbs = session.exec(select(KnowledgeBase).where(col(KnowledgeBase.tenant_id) == tenant)).all()
    caps = knowledge_base_capabilities(session, principal, [k.id for k in kbs])
    return [k for k in kbs if KbAction.READ in caps.get(k.id, frozenset())]
""",
    "existence_then_access": """
def revert_create(session, actor, c):
    doc = session.get(Document, c.object_id)
    if doc is None:
        return "gone"
    return access_document(session, actor.principal, doc.id, Action.EDIT).document
""",
    "access_then_require": """
def update(session, p, doc_id, needed):
    acc = access_document(session, p, doc_id, Action.READ)
    acc.require(*needed)
    if not can_move_document(session, p, doc_id, new_parent_id=None):
        raise PermissionDenied("not allowed to move the document there")
""",
    "join_then_batch_decision": """
def assets_of_readable(session, principal, kb_id):
    q = select(DocumentAsset).join(Document, col(Document.id) == col(DocumentAsset.document_id))
    rows = session.exec(q.where(col(Document.knowledge_base_id) == kb_id)).all()
    return filter_readable_documents(session, principal, {a.document_id for a in rows})
""",
    "lock_after_access": """
def lock_document(session, doc_id):
    return session.exec(select(Document).where(col(Document.id) == doc_id).with_for_update()).first()
""",
}


def test_the_guard_finds_each_old_copy() -> None:
    for name, src in _OLD_COPIES.items():
        assert findings(src), f"the guard misses the {name!r} shape"


def test_the_guard_leaves_legitimate_shapes_alone() -> None:
    for name, src in _LEGIT.items():
        assert findings(src) == [], f"the guard flags the legitimate {name!r} shape: {findings(src)}"
