"""The closed value sets of docs/data-model.md, shared by CHECK constraints and services."""

USER_STATUSES = ("pending_email_verification", "pending_activation", "active", "suspended", "deleted")
TENANT_ROLES = ("system_admin", "tenant_admin", "member")
SIGNUP_STATUSES = ("active", "pending_activation")
WORKSPACE_ROLES = ("owner", "admin", "member", "guest")
WORKSPACE_INVITE_ROLES = ("admin", "member", "guest")
CONTENT_ROLES = ("owner", "manager", "editor", "viewer")
CONTENT_INVITE_ROLES = ("manager", "editor", "viewer")
VISIBILITIES = ("private", "workspace", "public")
KB_STATUSES = ("active", "archived")
DOC_TYPES = ("folder", "page")
DOC_STATUSES = ("draft", "published", "archived", "deleted")
PERMISSION_MODES = ("inherit", "custom")
VERSION_SOURCES = ("manual", "upload", "import", "api")
CONTENT_OBJECT_TYPES = ("knowledge_base", "document")
INVITE_OBJECT_TYPES = ("workspace", "knowledge_base", "document")
SUBJECT_TYPES = ("user", "group")
COLLABORATOR_SOURCES = ("direct", "invitation", "system", "transfer")
INVITATION_STATUSES = ("pending", "accepted", "rejected", "expired", "revoked", "awaiting_approval")
IMPORT_STATUSES = ("pending", "running", "succeeded", "failed")
# The spec listed building/active/deprecated/failed; ready (rebuilt, healthy, not active) and dropped
# (collection dropped, profile kept) were added by migration 0002.
PROFILE_STATUSES = ("building", "ready", "active", "deprecated", "failed", "dropped")
ALIAS_SWITCH_KINDS = ("initial", "switch", "rollback")
REBUILD_STATUSES = ("pending", "running", "succeeded", "failed", "cancelled")
VERIFY_STATUSES = ("pending", "running", "succeeded", "failed")
INDEX_STATUSES = ("pending", "indexed", "failed")
CLIENT_STATUSES = ("active", "disabled")
CLIENT_REGISTRATIONS = ("dcr", "cimd", "app")  # app: an installation's own client (docs/apps.md#oauth)
GRANT_STATUSES = ("active", "revoked")
PAT_STATUSES = ("active", "revoked", "expired")
DIFY_KEY_STATUSES = ("active", "disabled", "revoked")
MAPPING_STATUSES = ("active", "disabled")
AUDIT_ACTOR_TYPES = ("user", "api_key", "system")
CHANGE_STATUSES = ("applied", "reverted", "conflict")  # conflict: a refused fact write (docs/facts.md)

# Content role strength, for "at least" comparisons.
ROLE_RANK = {"viewer": 1, "editor": 2, "manager": 3, "owner": 4}
