"""The predicate vocabulary of a tenant (docs/facts.md#predicates).

A predicate is dotted, at least two levels, its first level one of the fixed roots
(``openkb.apps.strings.PREDICATE_ROOTS``); below that anyone may add levels. Every core
predicate of docs/facts.md#core-predicates is seeded per tenant (lazily, on the tenant's first
facts call: one ``INSERT ... ON CONFLICT DO NOTHING``; later calls see ``finance.currency`` and
skip it — never a process-wide cache, which a rolled-back transaction would make lie). Apps declare
more in their manifest; those are added when the app is installed (or at its first call) and
kept after it is uninstalled, since facts may still use them.

Hint resolution for writes (``resolve_hint``), in this order:

1. the hint *is* a predicate (``pref.food.rated``): itself — added to the vocabulary when
   new, cardinality ``many``;
2. an alias of a predicate (case-insensitive, e.g. ``高分菜``);
3. a description match: the hint equals a predicate's zh-CN/en name, or is contained in a
   name or description (the shortest such predicate wins, then the name order);
4. otherwise ``x.<slug>`` (an ``x.`` predicate named after the hint).

Trap: the permission check runs on the *resolved* name, and a new predicate is inserted only
after that check passed (``ensure``): a refused write adds nothing to the vocabulary.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, col, select

from openkb.accounts.users import access_admin, get_tenant
from openkb.apps.strings import _LABELS, PREDICATE_ROOTS
from openkb.bootstrap import default_tenant
from openkb.errors import NotFound, ValidationError
from openkb.models import App, FactPredicate

# (predicate, cardinality) of docs/facts.md#core-predicates; names come from the permission
# sentences' labels so the account area and the switches agree
CORE: tuple[tuple[str, str], ...] = (
    ("identity.name", "one"),
    ("identity.nickname", "many"),
    ("identity.birthday", "one"),
    ("identity.language", "many"),
    ("contact.email", "many"),
    ("contact.phone", "many"),
    ("contact.address", "many"),
    ("location.home.city", "one"),
    ("location.home.address", "one"),
    ("location.work.city", "one"),
    ("location.timezone", "one"),
    ("relation.family", "many"),
    ("relation.spouse", "one"),
    ("relation.friend", "many"),
    ("relation.colleague", "many"),
    ("relation.member_of", "many"),
    ("work.company", "one"),
    ("work.title", "one"),
    ("work.project", "many"),
    ("pref.food.like", "many"),
    ("pref.food.dislike", "many"),
    ("pref.food.diet", "many"),
    ("pref.food.cuisine", "many"),
    ("pref.communication.style", "one"),
    ("pref.communication.language", "one"),
    ("schedule.routine", "many"),
    ("schedule.event", "many"),
    ("health.allergy", "many"),
    ("health.condition", "many"),
    ("finance.currency", "one"),
)
MAX_DESCRIPTION = 200
MAX_ALIASES = 20
_SEG = re.compile(r"[a-z][a-z0-9_]*\Z")  # \Z, not ``$``: that also matches before a final newline


def is_predicate(name: str) -> bool:
    segs = name.split(".")
    return len(segs) >= 2 and segs[0] in PREDICATE_ROOTS and all(_SEG.match(s) for s in segs) and len(name) <= 200


def check_predicate(name: str, field: str = "predicate") -> str:
    if not isinstance(name, str) or not is_predicate(name):
        raise ValidationError(
            f"{name!r} is not a predicate: dotted, at least two levels, lower-case words, the first one of "
            + ", ".join(PREDICATE_ROOTS),
            field=field,
        )
    return name


@dataclass(frozen=True, slots=True)
class Pred:
    predicate: str
    cardinality: str
    name_zh: str
    name_en: str
    description: str
    aliases: tuple[str, ...]
    origin: str
    app_id: uuid.UUID | None
    known: bool = True  # False: resolved, not yet in the vocabulary (``ensure`` adds it)


def _pred(r: FactPredicate) -> Pred:
    return Pred(r.predicate, r.cardinality, r.name_zh, r.name_en, r.description, tuple(r.aliases), r.origin, r.app_id)


def seed_core(session: Session, tenant_id: uuid.UUID) -> None:
    """Every core predicate for the tenant (idempotent; once per process per tenant)."""
    seeded: set[uuid.UUID] = session.info.setdefault("facts_seeded", set())
    if tenant_id in seeded:
        return
    if session.execute(
        text("SELECT 1 FROM fact_predicates WHERE tenant_id = :t AND predicate = 'finance.currency'"), {"t": tenant_id}
    ).first():
        seeded.add(tenant_id)
        return
    rows = []
    for p, card in CORE:
        zh, en = _LABELS.get(p, (p, p))
        rows.append({"id": uuid.uuid4(), "t": tenant_id, "p": p, "c": card, "zh": zh, "en": en})
    session.execute(
        text(
            "INSERT INTO fact_predicates (id, tenant_id, predicate, cardinality, name_zh, name_en, description, "
            "aliases, origin) VALUES (:id, :t, :p, :c, :zh, :en, '', '{}', 'core') "
            "ON CONFLICT (tenant_id, predicate) DO NOTHING"
        ),
        rows,
    )
    seeded.add(tenant_id)


def check_declared(predicates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A manifest's ``predicates``: each a valid name, ``one|many``, a description of at most
    200 characters written for the user, aliases."""
    out = []
    for p in predicates or []:
        name = check_predicate(p.get("predicate", ""), "predicates")
        card = p.get("cardinality", "many")
        if card not in ("one", "many"):
            raise ValidationError("cardinality is one or many", field="predicates")
        desc = p.get("description")
        if not isinstance(desc, str) or not desc.strip() or len(desc) > MAX_DESCRIPTION:
            raise ValidationError(
                f"each predicate needs a description of at most {MAX_DESCRIPTION} characters", field="predicates"
            )
        aliases = [a.strip() for a in p.get("aliases") or [] if isinstance(a, str) and a.strip()][:MAX_ALIASES]
        out.append({"predicate": name, "cardinality": card, "description": desc.strip(), "aliases": aliases})
    return out


def declare_app_predicates(session: Session, tenant_id: uuid.UUID, app: App) -> int:
    """Add the app's declared predicates to the tenant's vocabulary (a predicate that already
    exists — core, or declared by another app — is left as it is). Returns how many were new."""
    seed_core(session, tenant_id)
    n = 0
    for p in check_declared(list((app.manifest or {}).get("predicates") or [])):
        r = session.execute(
            text(
                "INSERT INTO fact_predicates (id, tenant_id, predicate, cardinality, name_zh, name_en, description, "
                "aliases, origin, app_id) VALUES (:id, :t, :p, :c, '', '', :d, :a, 'app', :app) "
                "ON CONFLICT (tenant_id, predicate) DO NOTHING"
            ),
            {
                "id": uuid.uuid4(),
                "t": tenant_id,
                "p": p["predicate"],
                "c": p["cardinality"],
                "d": p["description"],
                "a": p["aliases"],
                "app": app.id,
            },
        )
        n += r.rowcount or 0
    return n


def get(session: Session, tenant_id: uuid.UUID, predicate: str) -> Pred | None:
    seed_core(session, tenant_id)
    r = session.exec(
        select(FactPredicate).where(
            col(FactPredicate.tenant_id) == tenant_id, col(FactPredicate.predicate) == predicate
        )
    ).first()
    return _pred(r) if r is not None else None


def get_known(session: Session, tenant_id: uuid.UUID, hint: str) -> Pred | None:
    """Step 1 of hint resolution alone: the hint names a predicate already in the vocabulary
    (one indexed row; no seeding needed — a found row is the answer either way)."""
    if not isinstance(hint, str) or not is_predicate(hint.strip()):
        return None
    r = session.execute(_GET, {"t": tenant_id, "p": hint.strip()}).first()
    if r is None:
        return None
    return Pred(r.predicate, r.cardinality, r.name_zh, r.name_en, r.description, tuple(r.aliases), r.origin, r.app_id)


_GET = text(
    "SELECT predicate, cardinality, name_zh, name_en, description, aliases, origin, app_id FROM fact_predicates "
    "WHERE tenant_id = :t AND predicate = :p"
)


def all_predicates(session: Session, tenant_id: uuid.UUID) -> list[Pred]:
    seed_core(session, tenant_id)
    rows = session.exec(
        select(FactPredicate).where(col(FactPredicate.tenant_id) == tenant_id).order_by(col(FactPredicate.predicate))
    ).all()
    return [_pred(r) for r in rows]


def operator_predicates(session: Session, operator: Any, tenant: str | None = None) -> list[Pred]:
    """A tenant's vocabulary (default: the default tenant) for an administrator of it
    (``openkb facts predicates``, docs/facts.md#cli)."""
    scope = access_admin(session, operator)
    t = get_tenant(session, tenant) if tenant else default_tenant(session)
    if not scope.is_system_admin and scope.tenant_id != t.id:
        raise NotFound(f"no tenant {tenant!r}")
    return all_predicates(session, t.id)


def _norm(s: str) -> str:
    return " ".join(s.strip().lower().split())


def _fallback(hint: str, description: str | None) -> Pred:
    words = re.findall(r"[a-z0-9]+", hint.lower())
    slug = "_".join(words)[:60].strip("_")
    if not slug or not slug[0].isalpha():
        slug = "h" + hashlib.sha256(hint.encode("utf-8")).hexdigest()[:10]
    desc = (description or hint).strip()[:MAX_DESCRIPTION]
    return Pred(f"x.{slug}", "many", "", "", desc, (), "app", None, known=False)


def resolve_hint(session: Session, tenant_id: uuid.UUID, hint: str, description: str | None = None) -> Pred:
    """The vocabulary predicate a write's ``predicateHint`` means (see the module docstring)."""
    if not isinstance(hint, str) or not hint.strip():
        raise ValidationError("predicateHint must not be empty", field="predicateHint")
    hint = hint.strip()[:500]
    vocab = all_predicates(session, tenant_id)
    by_name = {p.predicate: p for p in vocab}
    if hint in by_name:
        return by_name[hint]
    if is_predicate(hint):
        desc = (description or "").strip()[:MAX_DESCRIPTION]
        return Pred(hint, "many", "", "", desc, (), "app", None, known=False)
    h = _norm(hint)
    for p in vocab:
        if any(_norm(a) == h for a in p.aliases):
            return p
    exact = [p for p in vocab if h in (_norm(p.name_zh), _norm(p.name_en))]
    if exact:
        return exact[0]
    if len(h) >= 2:
        contained = [
            p
            for p in vocab
            if (p.description and h in _norm(p.description))
            or (p.name_zh and h in _norm(p.name_zh))
            or (p.name_en and h in _norm(p.name_en))
        ]
        if contained:
            return min(contained, key=lambda p: (len(p.description or p.name_en), p.predicate))
    return _fallback(hint, description)


def ensure(session: Session, tenant_id: uuid.UUID, pred: Pred, app_id: uuid.UUID | None) -> Pred:
    """Insert a resolved-but-new predicate (after the permission check passed)."""
    if pred.known:
        return pred
    session.execute(
        text(
            "INSERT INTO fact_predicates (id, tenant_id, predicate, cardinality, name_zh, name_en, description, "
            "aliases, origin, app_id) VALUES (:id, :t, :p, :c, '', '', :d, '{}', :o, :app) "
            "ON CONFLICT (tenant_id, predicate) DO NOTHING"
        ),
        {
            "id": uuid.uuid4(),
            "t": tenant_id,
            "p": pred.predicate,
            "c": pred.cardinality,
            "d": pred.description,
            "o": "app" if app_id else "user",
            "app": app_id,
        },
    )
    got = get(session, tenant_id, pred.predicate)
    assert got is not None
    return got


def pred_out(p: Pred) -> dict[str, Any]:
    return {
        "predicate": p.predicate,
        "cardinality": p.cardinality,
        "names": {"zh-CN": p.name_zh, "en": p.name_en},
        "description": p.description,
        "aliases": list(p.aliases),
        "origin": p.origin,
    }
