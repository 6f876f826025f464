"""Yuque-style permission service (docs/permissions.md): the one decision point for every reader.

Import from here; the submodules are an implementation detail except for the services
(``collaborators``, ``members``, ``invitations``, ``share_links``, ``settings``).
"""

from openkb.permissions.access import (
    DocumentAccess,
    KnowledgeBaseAccess,
    WorkspaceAccess,
    access_document,
    access_knowledge_base,
    access_tree,
    access_workspace,
)
from openkb.permissions.change_log import ChangeScope, access_change, change_scope
from openkb.permissions.principal import READ_SCOPES, WRITE_SCOPES, Principal
from openkb.permissions.rules import Action, KbAction, WsAction
from openkb.permissions.scope import (
    ChunkAccess,
    ReadableScope,
    chunk_access,
    chunk_access_many,
    readable_scope,
    resolve_readable_principals_for_milvus,
)
from openkb.permissions.service import (
    ObjectRef,
    TreeAccess,
    can,
    can_create_document,
    can_create_share_link,
    can_delete_document,
    can_edit_document,
    can_in_knowledge_base,
    can_in_workspace,
    can_invite_collaborator,
    can_manage_document,
    can_manage_knowledge_base,
    can_manage_workspace,
    can_move_document,
    can_read_document,
    can_read_knowledge_base,
    document_capabilities,
    document_roles,
    filter_documents,
    filter_readable_documents,
    knowledge_base_capabilities,
    readable_tree,
    resolve_effective_role,
    resolve_workspace_role,
    tree_access,
)

__all__ = [
    "READ_SCOPES", "WRITE_SCOPES", "Action", "ChangeScope", "ChunkAccess", "DocumentAccess", "KbAction",
    "KnowledgeBaseAccess", "ObjectRef", "Principal", "ReadableScope", "TreeAccess", "WorkspaceAccess", "WsAction",
    "access_change", "access_document", "access_knowledge_base", "access_tree", "access_workspace",
    "can", "can_create_document", "can_create_share_link", "can_delete_document",
    "can_edit_document", "can_in_knowledge_base", "can_in_workspace", "can_invite_collaborator", "can_manage_document",
    "can_manage_knowledge_base", "can_manage_workspace", "can_move_document", "can_read_document",
    "can_read_knowledge_base", "change_scope", "chunk_access", "chunk_access_many", "document_capabilities", "document_roles", "filter_documents",
    "filter_readable_documents", "knowledge_base_capabilities", "readable_scope",
    "readable_tree", "resolve_effective_role", "resolve_readable_principals_for_milvus", "resolve_workspace_role",
    "tree_access",
]
