"""All tables. Importing this package registers every model on ``SQLModel.metadata``."""

from openkb.models.accounts import (
    AuthSettings,
    EmailToken,
    Group,
    GroupMember,
    RateLimitBucket,
    Tenant,
    TenantMembership,
    User,
    UserSession,
)
from openkb.models.audit import AuditLog, Change
from openkb.models.content import Document, DocumentVersion, KnowledgeBase, Workspace, WorkspaceMember
from openkb.models.indexing import (
    DocumentAsset,
    DocumentChunk,
    ImportJob,
    IndexRebuildJob,
    MilvusAliasSwitch,
    MilvusIndexProfile,
)
from openkb.models.integrations import (
    DifyApiKey,
    DifyKnowledgeMapping,
    McpOAuthAccessToken,
    McpOAuthAuthorizationCode,
    McpOAuthClient,
    McpOAuthGrant,
    McpOAuthRefreshToken,
    McpPersonalAccessToken,
)
from openkb.models.sharing import Collaborator, Invitation, InvitationAcceptance, ShareLink

__all__ = [
    "AuditLog",
    "AuthSettings",
    "Change",
    "Collaborator",
    "DifyApiKey",
    "DifyKnowledgeMapping",
    "Document",
    "DocumentAsset",
    "DocumentChunk",
    "DocumentVersion",
    "EmailToken",
    "Group",
    "GroupMember",
    "ImportJob",
    "IndexRebuildJob",
    "Invitation",
    "InvitationAcceptance",
    "KnowledgeBase",
    "McpOAuthAccessToken",
    "McpOAuthAuthorizationCode",
    "McpOAuthClient",
    "McpOAuthGrant",
    "McpOAuthRefreshToken",
    "McpPersonalAccessToken",
    "MilvusAliasSwitch",
    "MilvusIndexProfile",
    "RateLimitBucket",
    "ShareLink",
    "Tenant",
    "TenantMembership",
    "User",
    "UserSession",
    "Workspace",
    "WorkspaceMember",
]
