"""Mentions: which chunks of a user's documents name one of the user's entities
(docs/facts.md#mentions), so ``search(..., entities=[ref])`` returns only passages about them.

Whose entities: entities belong to one user, so a chunk is matched against the entities of the
users whose apps could find it (``readers``):

* the owner of the **personal workspace** holding it (``app_personal_spaces``: the diary, keep
  and the collections apps create there);
* elsewhere (team knowledge bases), every user with an installation that holds a collection of
  the chunk's knowledge base (selected for it, or created by it) **and** who may read the
  document — the permission service decides that (``filter_readable_documents``), never this
  module. Whether the app's grant is switched on and covers the folder is decided when it
  searches (``openkb.facts.search``: the granted roots), so a grant switched on later finds
  what was recorded already.

Never every user of the tenant: the matcher is one pattern over the identifiers of the users
matched, and thousands of users' identifiers make it slow (seconds to compile).

When: ``record_chunks`` runs when indexing writes a version's chunks (``openkb.indexing``);
``record_entity`` scans the current chunks the user's apps could find (the same rule) when an
entity is created or gains an identifier. Merging moves mentions to the survivor, deleting an
entity deletes its mentions (``openkb.facts.entities``), reverting the deletion finds them again.

Matching (``Matcher``), on NFKC, case-folded text:

* names with CJK characters match as substrings (Chinese and Japanese have no spaces between
  words: ``张三`` in ``今天和张三吃饭``); at least two characters;
* other names, emails, domains and handles match on Latin word boundaries (``Ann`` is not found
  in ``Annual``, ``Alice`` is in ``和Alice吃饭``); names of at least three characters;
* a handle ``platform:account`` is also found as ``@account``;
* phone numbers are found after normalizing the digit runs of the text like stored ones.

Trap: a chunk is matched against every identifier of every live entity of its user in one pass
(one compiled pattern per user and call), never one query per entity.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PGUUID
from sqlalchemy.types import Text
from sqlmodel import Session

from openkb.errors import ValidationError
from openkb.facts.identifiers import normalize
from openkb.permissions import Principal, filter_readable_documents

_UUIDS = ARRAY(PGUUID(as_uuid=True))
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_WORD = "0-9a-z_\u00c0-\u024f"
_PHONE = re.compile(r"\+?\d[\d\s\-().]{5,}\d")


def fold(s: str) -> str:
    return unicodedata.normalize("NFKC", s).casefold()


@dataclass
class Matcher:
    """Every identifier of one user's live entities, compiled for one pass over a text."""

    pattern: re.Pattern[str] | None
    words: dict[str, set[uuid.UUID]]  # folded word-bounded term -> entities
    cjk: dict[str, set[uuid.UUID]]  # folded CJK name -> entities
    phones: dict[str, set[uuid.UUID]]  # normalized phone -> entities

    def find(self, content: str) -> set[uuid.UUID]:
        t = fold(content)
        found: set[uuid.UUID] = set()
        for name, ents in self.cjk.items():  # a substring search each, at C speed
            if name in t:
                found |= ents
        if self.pattern is not None:
            for m in self.pattern.finditer(t):
                found |= self.words.get(m.group(1), set())
        if self.phones:
            for m in _PHONE.finditer(t):
                try:
                    found |= self.phones.get(normalize("phone", m.group(0)), set())
                except ValidationError:
                    continue
        return found

    @property
    def empty(self) -> bool:
        return not (self.words or self.cjk or self.phones)


def matcher(rows: Iterable[tuple[uuid.UUID, str, str]]) -> Matcher:
    """``rows``: (entity id, identifier kind, normalized value)."""
    words: dict[str, set[uuid.UUID]] = {}
    cjk: dict[str, set[uuid.UUID]] = {}
    phones: dict[str, set[uuid.UUID]] = {}
    for eid, kind, value in rows:
        v = fold(value)
        if kind == "phone":
            phones.setdefault(value, set()).add(eid)
        elif kind == "name" and _CJK.search(v):
            if len(v) >= 2:
                cjk.setdefault(v, set()).add(eid)
        elif kind == "name":
            if len(v) >= 3:
                words.setdefault(v, set()).add(eid)
        elif kind == "handle":
            platform, _, account = v.partition(":")
            words.setdefault(v, set()).add(eid)
            if account:
                words.setdefault("@" + account, set()).add(eid)
        elif kind in ("email", "domain", "url"):
            words.setdefault(v, set()).add(eid)
    pattern = None
    if words:
        # boundaries are Latin letters and digits only: a CJK character next to a Latin name
        # ("和Alice吃饭") is a boundary, as there are no spaces in Chinese
        bounded = rf"(?<![{_WORD}@.\-])({{}})(?![{_WORD}\-]|\.[{_WORD}])"
        pattern = _trie_pattern(words, bounded) or re.compile(
            bounded.format("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)))
        )
    return Matcher(pattern, words, cjk, phones)


def _trie_pattern(terms: Iterable[str], frame: str) -> re.Pattern[str] | None:
    """``frame`` with ``terms`` in its ``{}``, compiled, the terms written as a trie (shared
    prefixes written once, the longer continuation tried first).

    A flat alternation of the terms (longest first) had the regex engine try every term at every
    position that could start one: finding 10,000 names in a 3 KB chunk took 27 ms, per chunk and
    per user whose entities are matched. Through a trie the engine follows the text down one
    path, whatever the number of terms (0.25 ms). Terms that match at one position all lie on
    that path (each is a prefix of the text there), so trying the deeper one first, then
    backtracking, picks the same term as the flat alternation's longest-first order. None when
    the trie is too deep to compile (a chain of terms each one character longer than the last):
    the caller falls back to the flat alternation. (CJK names stay a substring search each: a
    pattern finding every name at every position, nested ones too, cost more in Python than
    10,000 searches in C.)

    Compiled patterns are kept by their terms (``_compiled``): every index job builds its
    users' matchers again, and compiling 10,000 terms takes about a second."""
    return _compiled(tuple(sorted(terms)), frame)


@lru_cache(maxsize=32)  # ~3 MB for 10,000 terms
def _compiled(terms: tuple[str, ...], frame: str) -> re.Pattern[str] | None:
    trie: dict[str, dict] = {}
    for term in terms:
        node = trie
        for ch in term:
            node = node.setdefault(ch, {})
        node[""] = {}
    try:
        return re.compile(frame.format(_trie_regex(trie)))
    except (RecursionError, re.error):
        return None


def _trie_regex(node: dict[str, dict]) -> str:
    """What may follow ``node``: its branches, optional when a term ends at it (greedy: the
    longer term is tried first). A run of nodes with one branch and no term ending is written
    as one literal."""
    branches = []
    for ch, child in sorted(node.items()):
        if not ch:
            continue
        run = [ch]
        while len(child) == 1 and "" not in child:
            ((nxt, child),) = child.items()
            run.append(nxt)
        branches.append(re.escape("".join(run)) + _trie_regex(child))
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if "" in node else body


_OWNER_IDENTIFIERS = text("""
SELECT i.entity_id, i.kind, i.value FROM entity_identifiers i
JOIN entities e ON e.id = i.entity_id AND e.merged_into IS NULL AND e.deleted_at IS NULL
WHERE i.tenant_id = :t AND i.user_id = :u
""")
_INSERT = text("""
INSERT INTO entity_mentions (id, tenant_id, entity_id, document_id, version_id, chunk_id)
SELECT gen_random_uuid(), :t, x.e, :d, :v, :c FROM unnest(:ents) AS x(e)
ON CONFLICT (chunk_id, entity_id) DO NOTHING
""").bindparams(bindparam("ents", type_=_UUIDS))


@dataclass(frozen=True)
class ChunkText:
    id: uuid.UUID
    tenant_id: uuid.UUID
    workspace_id: uuid.UUID
    knowledge_base_id: uuid.UUID
    document_id: uuid.UUID
    version_id: uuid.UUID
    text: str


def _record(session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID, chunks: list[ChunkText]) -> int:
    m = matcher(
        (r.entity_id, r.kind, r.value) for r in session.execute(_OWNER_IDENTIFIERS, {"t": tenant_id, "u": user_id})
    )
    if m.empty:
        return 0
    n = 0
    for c in chunks:
        ents = m.find(c.text)
        if ents:
            session.execute(
                _INSERT,
                {"t": c.tenant_id, "d": c.document_id, "v": c.version_id, "c": c.id, "ents": sorted(ents, key=str)},
            )
            n += len(ents)
    return n


_OWNERS = text(
    "SELECT tenant_id, workspace_id, user_id FROM app_personal_spaces WHERE workspace_id = ANY(:ws)"
).bindparams(bindparam("ws", type_=_UUIDS))
# users whose installations hold a collection of these knowledge bases (selected or created)
_REACHING = text("""
SELECT DISTINCT i.tenant_id, i.user_id, x.knowledge_base_id
FROM (SELECT installation_id, knowledge_base_id FROM app_selected_collections WHERE knowledge_base_id = ANY(:kbs)
      UNION ALL
      SELECT installation_id, knowledge_base_id FROM app_collections WHERE knowledge_base_id = ANY(:kbs)) x
JOIN app_installations i ON i.id = x.installation_id AND i.status = 'active'
""").bindparams(bindparam("kbs", type_=_UUIDS))


def readers(session: Session, items: list[ChunkText]) -> dict[tuple[uuid.UUID, uuid.UUID], list[ChunkText]]:
    """(tenant, user) -> the chunks among ``items`` to match against that user's entities (the
    module's rule: the personal workspace's owner; elsewhere the users whose installations hold
    a collection of the knowledge base and whom the permission service lets read the page)."""
    out: dict[tuple[uuid.UUID, uuid.UUID], dict[uuid.UUID, ChunkText]] = {}
    owners = {
        (r.tenant_id, r.workspace_id): r.user_id
        for r in session.execute(_OWNERS, {"ws": sorted({c.workspace_id for c in items}, key=str)})
    }
    rest = []
    for c in items:
        u = owners.get((c.tenant_id, c.workspace_id))
        if u is not None:
            out.setdefault((c.tenant_id, u), {})[c.id] = c
        else:
            rest.append(c)
    if rest:
        users: dict[tuple[uuid.UUID, uuid.UUID], set[uuid.UUID]] = {}
        for r in session.execute(_REACHING, {"kbs": sorted({c.knowledge_base_id for c in rest}, key=str)}):
            users.setdefault((r.tenant_id, r.user_id), set()).add(r.knowledge_base_id)
        for (t, u), kbs in users.items():
            mine = [c for c in rest if c.tenant_id == t and c.knowledge_base_id in kbs]
            ok = filter_readable_documents(
                session, Principal.user(u, t), list(dict.fromkeys(c.document_id for c in mine)), for_search=True
            )
            for c in mine:
                if c.document_id in ok:
                    out.setdefault((t, u), {})[c.id] = c
    return {k: list(v.values()) for k, v in out.items()}


def record_chunks(session: Session, chunks: Iterable[object]) -> int:
    """Mentions in freshly written chunks (``DocumentChunk`` rows, flushed), for the users the
    module's rule names (``readers``). Returns how many (chunk, entity) pairs were found."""
    items = [
        ChunkText(c.id, c.tenant_id, c.workspace_id, c.knowledge_base_id, c.document_id, c.version_id, c.content_text)  # type: ignore[attr-defined]
        for c in chunks
    ]
    if not items:
        return 0
    return sum(_record(session, t, u, cs) for (t, u), cs in readers(session, items).items())


_USER_CHUNKS = text("""
SELECT c.id, c.tenant_id, c.workspace_id, c.knowledge_base_id, c.document_id, c.version_id, c.content_text
FROM document_chunks c
JOIN documents d ON d.id = c.document_id AND d.current_version_id = c.version_id
WHERE c.tenant_id = :t
  AND (c.workspace_id IN (SELECT workspace_id FROM app_personal_spaces WHERE tenant_id = :t AND user_id = :u)
       OR c.knowledge_base_id IN (
           SELECT x.knowledge_base_id FROM app_installations i
           JOIN (SELECT installation_id, knowledge_base_id FROM app_selected_collections
                 UNION ALL SELECT installation_id, knowledge_base_id FROM app_collections) x ON x.installation_id = i.id
           WHERE i.tenant_id = :t AND i.user_id = :u AND i.status = 'active'))
  AND (CAST(:likes AS text[]) IS NULL OR lower(c.content_text) LIKE ANY(:likes))
""").bindparams(bindparam("likes", type_=ARRAY(Text)))


def record_entity(session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID, entity_id: uuid.UUID) -> int:
    """Match one entity (new, or with a new identifier) against the current chunks the user's
    apps could find (``readers``, this user only); a ``LIKE`` on its terms narrows the chunks
    first (not for phones, whose spellings vary)."""
    ids = session.execute(
        text("SELECT entity_id, kind, value FROM entity_identifiers WHERE entity_id = :e"), {"e": entity_id}
    ).all()
    m = matcher((r.entity_id, r.kind, r.value) for r in ids)
    if m.empty:
        return 0
    rows = [ChunkText(*r) for r in session.execute(_USER_CHUNKS, {"t": tenant_id, "u": user_id, "likes": _likes(m)})]
    rows = [c for c in rows if entity_id in m.find(c.text)]
    if not rows:
        return 0
    n = 0
    for c in readers(session, rows).get((tenant_id, user_id), []):
        session.execute(
            _INSERT, {"t": c.tenant_id, "d": c.document_id, "v": c.version_id, "c": c.id, "ents": [entity_id]}
        )
        n += 1
    return n


_KB_CHUNKS = text("""
SELECT c.id, c.tenant_id, c.workspace_id, c.knowledge_base_id, c.document_id, c.version_id, c.content_text
FROM document_chunks c
JOIN documents d ON d.id = c.document_id AND d.current_version_id = c.version_id
WHERE c.tenant_id = :t AND c.knowledge_base_id = ANY(:kbs)
  AND (CAST(:likes AS text[]) IS NULL OR lower(c.content_text) LIKE ANY(:likes))
""").bindparams(bindparam("kbs", type_=_UUIDS), bindparam("likes", type_=ARRAY(Text)))


def _likes(m: Matcher) -> list[str] | None:
    """``LIKE`` patterns narrowing chunks to those that may match (None: phones, whose
    spellings vary, need every chunk)."""
    if m.phones:
        return None
    esc = [t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").lstrip("@") for t in [*m.words, *m.cjk]]
    return ["%" + t + "%" for t in esc]


def record_selected(session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID, kb_ids: Iterable[uuid.UUID]) -> int:
    """A collection selected for one of the user's installations: what is indexed there already
    is matched against the user's entities (``readers`` decides, so only pages the user may
    read), as indexing would have had the collection been selected then."""
    kbs = sorted(set(kb_ids), key=str)
    if not kbs:
        return 0
    m = matcher(
        (r.entity_id, r.kind, r.value) for r in session.execute(_OWNER_IDENTIFIERS, {"t": tenant_id, "u": user_id})
    )
    if m.empty:
        return 0
    rows = [ChunkText(*r) for r in session.execute(_KB_CHUNKS, {"t": tenant_id, "kbs": kbs, "likes": _likes(m)})]
    rows = [c for c in rows if m.find(c.text)]
    if not rows:
        return 0
    return _record(session, tenant_id, user_id, readers(session, rows).get((tenant_id, user_id), []))


def chunks_mentioning(session: Session, entity_ids: list[uuid.UUID]) -> set[str]:
    """Chunk ids (as text, like search hits) that mention any of the entities."""
    if not entity_ids:
        return set()
    return {
        str(r.chunk_id)
        for r in session.execute(
            text("SELECT chunk_id FROM entity_mentions WHERE entity_id = ANY(:e)").bindparams(
                bindparam("e", type_=_UUIDS)
            ),
            {"e": entity_ids},
        )
    }
