"""Knowledge permission strings (docs/apps.md#permission-strings): ``type.action:scope``.

An app asks for narrow strings in its manifest; the user switches each one on or off per
installation. This module parses them, checks a manifest's set as a whole, and says each one as
a sentence in zh-CN and en (the switches in the account area show the sentence, not the code).

Rules (the seed of docs/apps.md):

* ``facts.read|write:<subject>:<prefix>`` — subject ``self`` or an entity kind; prefix a full
  predicate ``a.b.c`` or ``a.b.*``: **at least two levels** before the ``*`` (``self:*`` and
  ``self:location.*`` are refused); the first level is one of the fixed roots.
* a ``facts.write`` must be covered by a ``facts.read`` of the same manifest;
* ``entities.resolve|read|write:<kind>``; ``entities.write`` includes ``entities.resolve``;
* ``collections.read|write:<diary|keep|user-selected>``; ``collections.create``,
  ``collections.bulk``, ``changes.manage``, ``origin.override`` take no scope;
* anything else (``email.read``, ``collections.delete``, a scope where none belongs) is refused.

Facts and entities are parsed and stored now; the calls that use them come with the next issue.
Trap: ``covers`` is prefix containment on whole segments — ``pref.food.*`` covers
``pref.food.like`` and ``pref.food.rated.*`` but not ``pref.foods.x``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from openkb.errors import InvalidPermissionString

PREDICATE_ROOTS = ("identity", "contact", "location", "relation", "pref", "schedule", "work", "health", "finance", "x")
COLLECTION_TARGETS = ("diary", "keep", "user-selected")
NO_SCOPE = ("collections.create", "collections.bulk", "changes.manage", "origin.override")
MAX_STRING = 200
MAX_PERMISSIONS = 100

_SEGMENT = re.compile(r"[a-z][a-z0-9_]*\Z")  # \Z, not ``$``: that also matches before a final newline
_KIND = re.compile(r"[a-z][a-z0-9_-]{0,39}\Z")


@dataclass(frozen=True, slots=True)
class Permission:
    """One parsed string. ``scope`` is the collection target, the entity kind, or for facts
    ``subject``+``prefix`` (``wildcard``: the prefix ended in ``.*``)."""

    type: str  # facts | entities | collections | changes | origin
    action: str
    subject: str | None = None
    prefix: str | None = None  # facts: dotted path without the trailing .*
    wildcard: bool = False
    target: str | None = None  # collections target, entities kind

    @property
    def name(self) -> str:
        return f"{self.type}.{self.action}"

    def __str__(self) -> str:
        if self.type == "facts":
            return f"{self.name}:{self.subject}:{self.prefix}{'.*' if self.wildcard else ''}"
        if self.target is not None:
            return f"{self.name}:{self.target}"
        return self.name

    def covers_prefix(self, other: Permission) -> bool:
        """Same subject and this prefix contains the other's (facts only)."""
        if self.type != "facts" or other.type != "facts" or self.subject != other.subject:
            return False
        assert self.prefix is not None and other.prefix is not None
        if not self.wildcard:
            return not other.wildcard and self.prefix == other.prefix
        return other.prefix == self.prefix or other.prefix.startswith(self.prefix + ".")

    def covers_predicate(self, predicate: str) -> bool:
        """Whether a concrete predicate falls under this facts string."""
        assert self.prefix is not None
        if not self.wildcard:
            return predicate == self.prefix
        return predicate.startswith(self.prefix + ".")


def _refuse(s: str, why: str) -> InvalidPermissionString:
    return InvalidPermissionString(
        f"invalid knowledge permission {s!r}: {why}", field="permissions", issues=[{"permission": s, "reason": why}]
    )


def parse(s: str) -> Permission:
    """One string, or ``InvalidPermissionString`` saying why not."""
    if not isinstance(s, str) or not s.strip():
        raise _refuse(str(s), "empty")
    raw = s.strip()
    if len(raw) > MAX_STRING:
        raise _refuse(raw[:50] + "…", f"longer than {MAX_STRING} characters")
    head, sep, scope = raw.partition(":")
    typ, dot, action = head.partition(".")
    if not dot:
        raise _refuse(raw, "expected type.action")
    if typ == "facts":
        if action not in ("read", "write"):
            raise _refuse(raw, "facts actions are read and write")
        subject, sep2, prefix = scope.partition(":")
        if not sep or not sep2 or not subject or not prefix:
            raise _refuse(raw, "expected facts.<read|write>:<subject>:<prefix>")
        if subject != "self" and not _KIND.match(subject):
            raise _refuse(raw, "subject is self or an entity kind such as person")
        wildcard = prefix.endswith(".*") or prefix == "*"
        path = prefix[:-2] if prefix.endswith(".*") else ("" if prefix == "*" else prefix)
        segs = path.split(".") if path else []
        if len(segs) < 2:
            raise _refuse(raw, "the predicate prefix needs at least two levels (a.b.* or a.b.c)")
        if not all(_SEGMENT.match(x) for x in segs):
            raise _refuse(raw, "predicate levels are lower-case words separated by dots")
        if segs[0] not in PREDICATE_ROOTS:
            raise _refuse(raw, f"the first predicate level is one of {', '.join(PREDICATE_ROOTS)}")
        return Permission("facts", action, subject=subject, prefix=path, wildcard=wildcard)
    if typ == "entities":
        if action not in ("resolve", "read", "write"):
            raise _refuse(raw, "entities actions are resolve, read and write")
        if not sep or not _KIND.match(scope):
            raise _refuse(raw, "expected entities.<action>:<kind> (e.g. person, org, place)")
        return Permission("entities", action, target=scope)
    if typ == "collections" and action in ("read", "write"):
        if scope not in COLLECTION_TARGETS:
            raise _refuse(raw, f"the target is one of {', '.join(COLLECTION_TARGETS)}")
        return Permission("collections", action, target=scope)
    if head in NO_SCOPE:
        if sep:
            raise _refuse(raw, f"{head} takes no scope")
        return Permission(typ, action)
    if typ in ("facts", "entities", "collections", "changes", "origin"):
        raise _refuse(raw, f"unknown action {action!r} of {typ}")
    raise _refuse(raw, f"unknown type {typ!r}")


def parse_set(strings: Iterable[str]) -> list[Permission]:
    """A manifest's list: each parsed, duplicates dropped, every ``facts.write`` covered by a
    ``facts.read``. All problems are reported at once (``issues``), as the install check does."""
    out: list[Permission] = []
    issues: list[dict[str, str]] = []
    seen: set[str] = set()
    items = list(strings)
    if len(items) > MAX_PERMISSIONS:
        raise InvalidPermissionString(f"at most {MAX_PERMISSIONS} permissions", field="permissions")
    for s in items:
        try:
            p = parse(s)
        except InvalidPermissionString as e:
            issues.extend(e.extra["issues"])
            continue
        if str(p) not in seen:
            seen.add(str(p))
            out.append(p)
    reads = [p for p in out if p.type == "facts" and p.action == "read"]
    for p in out:
        if p.type == "facts" and p.action == "write" and not any(r.covers_prefix(p) for r in reads):
            issues.append({"permission": str(p), "reason": "facts.write must be covered by a facts.read"})
    if issues:
        first = issues[0]
        raise InvalidPermissionString(
            f"invalid knowledge permission {first['permission']!r}: {first['reason']}"
            + (f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""),
            field="permissions",
            issues=issues,
        )
    return out


# --- sentences ---------------------------------------------------------------------------------

# labels of predicate prefixes (the core predicates of docs/apps.md#core-predicates and their groups)
_LABELS: dict[str, tuple[str, str]] = {
    "identity": ("身份信息", "identity"),
    "identity.name": ("姓名", "name"),
    "identity.nickname": ("称呼", "nicknames"),
    "identity.birthday": ("生日", "birthday"),
    "identity.language": ("会说的语言", "languages"),
    "contact": ("联系方式", "contact details"),
    "contact.email": ("邮箱", "email addresses"),
    "contact.phone": ("电话", "phone numbers"),
    "contact.address": ("地址", "addresses"),
    "location": ("位置", "locations"),
    "location.home": ("居住地", "home location"),
    "location.home.city": ("居住城市", "home city"),
    "location.home.address": ("住址", "home address"),
    "location.work": ("工作地点", "work location"),
    "location.work.city": ("工作城市", "work city"),
    "location.timezone": ("时区", "time zone"),
    "relation": ("人际关系", "relationships"),
    "relation.family": ("家人", "family"),
    "relation.spouse": ("配偶", "spouse"),
    "relation.friend": ("朋友", "friends"),
    "relation.colleague": ("同事", "colleagues"),
    "relation.member_of": ("所属组织", "memberships"),
    "work": ("工作信息", "work"),
    "work.company": ("公司", "company"),
    "work.title": ("职位", "job title"),
    "work.project": ("项目", "projects"),
    "pref": ("偏好", "preferences"),
    "pref.food": ("饮食偏好", "food preferences"),
    "pref.food.like": ("喜欢的食物", "foods you like"),
    "pref.food.dislike": ("不喜欢的食物", "foods you dislike"),
    "pref.food.diet": ("饮食习惯", "diet"),
    "pref.food.cuisine": ("喜欢的菜系", "cuisines"),
    "pref.communication": ("沟通偏好", "communication preferences"),
    "pref.communication.style": ("沟通风格", "communication style"),
    "pref.communication.language": ("回复语言", "reply language"),
    "schedule": ("日程", "schedule"),
    "schedule.routine": ("作息", "routine"),
    "schedule.event": ("日程", "events"),
    "health": ("健康信息", "health"),
    "health.allergy": ("过敏", "allergies"),
    "health.condition": ("健康状况", "health conditions"),
    "finance": ("财务信息", "finances"),
    "finance.currency": ("常用货币", "currency"),
}
_KINDS: dict[str, tuple[str, str]] = {
    "person": ("联系人", "contacts"),
    "org": ("组织", "organisations"),
    "place": ("地点", "places"),
}
_TARGETS: dict[str, tuple[str, str]] = {
    "diary": ("你的日记", "your diary"),
    "keep": ("你的留存", "your Keep collection"),
    "user-selected": ("你选定的知识库", "the collections you choose"),
}
_FIXED: dict[str, tuple[str, str]] = {
    "collections.create": ("创建自己的知识库", "Create its own collections"),
    "collections.bulk": ("大批量写入知识库(每天最多 2 亿字符)", "Write in bulk (up to 200,000,000 characters a day)"),
    "changes.manage": ("查看和撤销所有应用写入的知识", "View and undo knowledge written by any app"),
    "origin.override": ("代表其他应用写入数据", "Write data on behalf of other apps"),
}


def _label(prefix: str) -> tuple[str, str]:
    if prefix in _LABELS:
        return _LABELS[prefix]
    return (f"「{prefix}」信息", f"“{prefix}” information")


def sentence(p: Permission | str, lang: str = "en") -> str:
    """The sentence a switch shows (``lang``: ``zh-CN`` or ``en``)."""
    p = parse(p) if isinstance(p, str) else p
    zh = lang.lower().startswith("zh")
    i = 0 if zh else 1
    if p.type == "facts":
        assert p.prefix is not None
        lab = _label(p.prefix)
        if p.subject == "self":
            whose = ("你的", "your ")
        else:
            k = _KINDS.get(p.subject or "", (p.subject or "", p.subject or ""))
            whose = (f"{k[0]}的", f"your {k[1]}' ")
        if p.action == "read":
            return f"读取{whose[0]}{lab[0]}" if zh else f"Read {whose[1]}{lab[1]}"
        return f"记录{whose[0]}{lab[0]}" if zh else f"Record {whose[1]}{lab[1]}"
    if p.type == "entities":
        k = _KINDS.get(p.target or "", (p.target or "", p.target or ""))
        if p.action == "resolve":
            return f"根据邮箱等查询{k[0]}的名字" if zh else f"Look up the names of {k[1]} by email and the like"
        if p.action == "read":
            return f"查看你的{k[0]}列表" if zh else f"See your list of {k[1]}"
        return f"新增和编辑{k[0]}" if zh else f"Add and edit {k[1]}"
    if p.type == "collections" and p.target is not None:
        t = _TARGETS[p.target][i]
        if p.action == "read":
            return f"读取{t}" if zh else f"Read {t}"
        return f"写入{t}" if zh else f"Write to {t}"
    return _FIXED[p.name][i]


def sentences(p: Permission | str) -> dict[str, str]:
    return {"zh-CN": sentence(p, "zh-CN"), "en": sentence(p, "en")}
