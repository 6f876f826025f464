/**
 * The one way the web app talks to the server: the public REST API (docs/api.md), cookie
 * session + CSRF header, JSON in and out. Types come from the generated OpenAPI schema
 * (`schema.d.ts`, from web/openapi.json), so a renamed field breaks `npm run build`.
 *
 * Errors: every non-2xx body is `{"error": CODE, "detail": ...}`; it becomes an `ApiError`
 * whose `code` pages switch on (VERSION_CONFLICT, SHARE_PASSWORD_REQUIRED, ...). A network
 * failure is `ApiError` with code `NETWORK`.
 *
 * Trap: the CSRF token belongs to the session. It is learned from login or `GET /api/auth/me`;
 * if a write answers CSRF_FAILED (e.g. the session was renewed in another tab) the token is
 * fetched again and the write retried once. A write sent while the session is still loading
 * (a page that posts as it opens: search) waits for that load instead of going without a token,
 * failing and going again.
 */
import type { components } from './schema'

export type S = components['schemas']

export class ApiError extends Error {
  readonly code: string
  readonly status: number
  readonly detail: string
  readonly body: Record<string, unknown>

  constructor(status: number, body: Record<string, unknown>) {
    const code = typeof body.error === 'string' ? body.error : status === 0 ? 'NETWORK' : `HTTP_${status}`
    const detail = typeof body.detail === 'string' ? body.detail : ''
    super(`${code}: ${detail}`)
    this.code = code
    this.status = status
    this.detail = detail
    this.body = body
  }
}

let csrfToken: string | null = null

export function setCsrfToken(token: string | null | undefined): void {
  csrfToken = token ?? null
}

let csrfLoading: Promise<unknown> | null = null

/** The session load in flight (lib/session.ts), which brings the token; never rejects. */
export function loadingCsrf(load: Promise<unknown>): void {
  csrfLoading = load
  const done = (): void => {
    if (csrfLoading === load) csrfLoading = null
  }
  load.then(done, done)
}

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE'

export interface RequestOptions {
  headers?: Record<string, string>
  signal?: AbortSignal
}

async function send(method: Method, url: string, body: unknown, opts: RequestOptions): Promise<Response> {
  const headers: Record<string, string> = { Accept: 'application/json', ...opts.headers }
  if (body !== undefined && !(body instanceof FormData)) headers['Content-Type'] = 'application/json'
  if (method !== 'GET' && csrfToken) headers['X-CSRF-Token'] = csrfToken
  try {
    return await fetch(url, {
      method,
      headers,
      credentials: 'same-origin',
      signal: opts.signal,
      body: body === undefined ? undefined : body instanceof FormData ? body : JSON.stringify(body),
    })
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e
    throw new ApiError(0, { error: 'NETWORK', detail: String(e) })
  }
}

export async function request<T>(method: Method, url: string, body?: unknown, opts: RequestOptions = {}): Promise<T> {
  if (method !== 'GET' && !csrfToken && csrfLoading) await csrfLoading
  let res = await send(method, url, body, opts)
  if (res.status === 403 && method !== 'GET') {
    const err = await errorOf(res.clone())
    if (err.code === 'CSRF_FAILED') {
      await refreshCsrf()
      res = await send(method, url, body, opts)
    }
  }
  if (!res.ok) throw await errorOf(res)
  if (res.status === 204) return undefined as T
  const text = await res.text()
  return (text ? JSON.parse(text) : undefined) as T
}

async function errorOf(res: Response): Promise<ApiError> {
  let body: Record<string, unknown> = {}
  try {
    const parsed: unknown = await res.json()
    if (parsed && typeof parsed === 'object') body = parsed as Record<string, unknown>
  } catch {
    /* not JSON: keep the status only */
  }
  return new ApiError(res.status, body)
}

async function refreshCsrf(): Promise<void> {
  const res = await send('GET', '/api/auth/me', undefined, {})
  if (res.ok) setCsrfToken(((await res.json()) as S['MeOut']).csrf_token)
}

const enc = encodeURIComponent

/** A query string of the non-empty values. */
function qs(params: Record<string, string | undefined>): string {
  const u = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v) u.set(k, v)
  return u.toString()
}

/** SHA-256 hex of the UTF-8 text: the `markdown_hash` of a save (docs/api.md). */
export async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text))
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('')
}

export type ObjectType = 'workspace' | 'knowledge_base' | 'document'
/** One entry of the share panel's people picker (GET .../collaborator-candidates). */
export interface Candidate {
  subject_type: 'user' | 'group'
  subject_id: string
  name: string
  email?: string | null
}

export const api = {
  // accounts (docs/accounts.md)
  me: () => request<S['MeOut']>('GET', '/api/auth/me'),
  login: (body: S['LoginIn']) => request<S['LoginOut']>('POST', '/api/auth/login', body),
  logout: () => request<void>('POST', '/api/auth/logout'),
  register: (body: S['RegisterIn']) => request<S['RegisterOut']>('POST', '/api/auth/register', body),
  verifyEmail: (body: S['VerifyIn']) => request<S['VerifyOut']>('POST', '/api/auth/verify-email', body),
  resetRequest: (body: S['ResetRequestIn']) => request<S['ResetRequestOut']>('POST', '/api/auth/password-reset/request', body),
  resetConfirm: (body: S['ResetConfirmIn']) => request<S['VerifyOut']>('POST', '/api/auth/password-reset/confirm', body),

  // my account (docs/web.md#my-account)
  updateProfile: (body: S['ProfileIn']) => request<S['UserOut']>('PUT', '/api/me/profile', body),
  changePassword: (body: S['PasswordChangeIn']) => request<S['PasswordChangeOut']>('POST', '/api/me/password', body),
  sessions: () => request<S['SessionList']>('GET', '/api/me/sessions'),
  revokeSession: (id: string) => request<void>('DELETE', `/api/me/sessions/${enc(id)}`),
  revokeOtherSessions: () => request<S['RevokedOut']>('POST', '/api/me/sessions/revoke-others'),
  tokens: () => request<S['PatList']>('GET', '/api/me/tokens'),
  /** The MCP endpoint's protected-resource metadata (RFC 9728): its ``resource`` is the address
   * clients connect to, built from APP_BASE_URL by the server (docs/mcp.md#connecting). */
  mcpResource: () => request<{ resource: string; scopes_supported: string[] }>('GET', '/.well-known/oauth-protected-resource/mcp'),
  createToken: (body: S['PatIn']) => request<S['PatCreated']>('POST', '/api/me/tokens', body),
  revokeToken: (id: string) => request<void>('DELETE', `/api/me/tokens/${enc(id)}`),
  oauthGrants: () => request<S['GrantList']>('GET', '/api/me/oauth-grants'),
  revokeOauthGrant: (id: string) => request<void>('DELETE', `/api/me/oauth-grants/${enc(id)}`),

  // admin console (docs/web.md#admin-console)
  adminUsers: (p: { q?: string; status?: string; limit: number; offset: number }) =>
    request<S['AdminUserList']>('GET', `/api/admin/users?${qs({ q: p.q, status: p.status, limit: String(p.limit), offset: String(p.offset) })}`),
  adminActivate: (id: string) => request<S['UserResult']>('POST', `/api/admin/users/${enc(id)}/activate`),
  adminSuspend: (id: string) => request<S['UserResult']>('POST', `/api/admin/users/${enc(id)}/suspend`),
  adminReject: (id: string) => request<S['UserResult']>('POST', `/api/admin/users/${enc(id)}/reject`),
  adminDeleteUser: (id: string, body: S['DeleteUserIn'] = {}) => request<S['DeletedUserOut']>('POST', `/api/admin/users/${enc(id)}/delete`, body),
  adminSetRole: (id: string, body: S['RoleIn']) => request<S['RoleOut']>('POST', `/api/admin/users/${enc(id)}/role`, body),
  adminResendVerification: (id: string) => request<S['UserResult']>('POST', `/api/admin/users/${enc(id)}/resend-verification`),
  authSettings: () => request<S['AuthSettingsOut']>('GET', '/api/admin/auth-settings'),
  updateAuthSettings: (body: S['AuthSettingsIn']) => request<S['AuthSettingsOut']>('PUT', '/api/admin/auth-settings', body),
  tenantSettings: () => request<S['TenantSettingsOut']>('GET', '/api/admin/tenant-settings'),
  updateTenantSettings: (body: S['TenantSettingsIn']) => request<S['TenantSettingsOut']>('PUT', '/api/admin/tenant-settings', body),
  resetAuthSettings: (tenantId: string) => request<void>('DELETE', `/api/admin/auth-settings?tenant_id=${enc(tenantId)}`),
  adminImportJobs: (p: { status?: string; limit: number; offset: number }) =>
    request<S['AdminImportJobList']>('GET', `/api/admin/import-jobs?${qs({ status: p.status, limit: String(p.limit), offset: String(p.offset) })}`),
  auditLogs: (p: Record<string, string>) => request<S['AuditLogList']>('GET', `/api/admin/audit-logs?${qs(p)}`),
  milvusStatus: () => request<Record<string, unknown>>('GET', '/api/admin/milvus/status'),
  milvusProfiles: () => request<{ items: unknown[] }>('GET', '/api/admin/milvus/index-profiles'),
  createProfile: (body: Record<string, unknown>) => request<Record<string, unknown>>('POST', '/api/admin/milvus/index-profiles', body),
  rebuildJobs: () => request<{ items: unknown[] }>('GET', '/api/admin/milvus/rebuild-jobs'),
  startRebuild: (body: S['RebuildIn']) => request<Record<string, unknown>>('POST', '/api/admin/milvus/rebuild-jobs', body),
  switchAlias: (body: S['SwitchIn']) => request<Record<string, unknown>>('POST', '/api/admin/milvus/aliases/switch', body),
  aliasHistory: () => request<Record<string, unknown>>('GET', '/api/admin/milvus/aliases/history'),
  verifyJobs: () => request<S['VerifyJobList']>('GET', '/api/admin/milvus/verify-jobs'),
  startVerify: (body: S['IndexVerifyIn']) => request<S['VerifyJobOut']>('POST', '/api/admin/milvus/verify-jobs', body),
  dropCollection: (profile: string) => request<Record<string, unknown>>('DELETE', `/api/admin/milvus/index-profiles/${enc(profile)}/collection`),
  difyKeys: () => request<S['KeyList']>('GET', '/api/admin/dify/keys'),
  createDifyKey: (body: S['KeyIn']) => request<S['KeyWithSecret']>('POST', '/api/admin/dify/keys', body),
  disableDifyKey: (id: string) => request<S['StatusOut']>('POST', `/api/admin/dify/keys/${enc(id)}/disable`),
  enableDifyKey: (id: string) => request<S['StatusOut']>('POST', `/api/admin/dify/keys/${enc(id)}/enable`),
  revokeDifyKey: (id: string) => request<S['StatusOut']>('POST', `/api/admin/dify/keys/${enc(id)}/revoke`),
  rotateDifyKey: (id: string) => request<S['KeyWithSecret']>('POST', `/api/admin/dify/keys/${enc(id)}/rotate`),
  difyMappings: () => request<S['MappingList']>('GET', '/api/admin/dify/mappings'),
  mapDify: (body: S['MappingIn']) => request<S['MappingResult']>('POST', '/api/admin/dify/mappings', body),
  disableDifyMapping: (id: string) => request<S['MappingOut']>('POST', `/api/admin/dify/mappings/${enc(id)}/disable`),
  enableDifyMapping: (id: string) => request<S['MappingOut']>('POST', `/api/admin/dify/mappings/${enc(id)}/enable`),
  difyInfo: () => request<{ endpoint: string; retrieval_url: string; warnings: string[] }>('GET', '/api/admin/dify/info'),
  mcpClients: () => request<S['McpClientList']>('GET', '/api/admin/mcp/clients'),
  disableMcpClient: (id: string) => request<S['McpStatusOut']>('POST', `/api/admin/mcp/clients/${enc(id)}/disable`),
  enableMcpClient: (id: string) => request<S['McpStatusOut']>('POST', `/api/admin/mcp/clients/${enc(id)}/enable`),
  mcpGrants: () => request<S['McpGrantList']>('GET', '/api/admin/mcp/grants'),
  revokeMcpGrant: (id: string) => request<S['McpStatusOut']>('POST', `/api/admin/mcp/grants/${enc(id)}/revoke`),
  groups: () => request<S['GroupList']>('GET', '/api/admin/groups'),
  createGroup: (body: S['GroupIn']) => request<S['GroupOut']>('POST', '/api/admin/groups', body),
  renameGroup: (id: string, body: S['GroupIn']) => request<S['GroupOut']>('PUT', `/api/admin/groups/${enc(id)}`, body),
  deleteGroup: (id: string) => request<void>('DELETE', `/api/admin/groups/${enc(id)}`),
  addGroupMember: (id: string, body: S['server__routers__groups__MemberIn']) =>
    request<S['server__routers__groups__MemberOut']>('POST', `/api/admin/groups/${enc(id)}/members`, body),
  removeGroupMember: (id: string, userId: string) => request<void>('DELETE', `/api/admin/groups/${enc(id)}/members/${enc(userId)}`),
  groupMembers: (id: string) => request<S['server__routers__groups__MemberList']>('GET', `/api/admin/groups/${enc(id)}/members`),

  recentDocuments: (limit = 20) => request<S['RecentList']>('GET', `/api/me/recent-documents?limit=${limit}`),
  sharedDocuments: (limit = 20) => request<S['SharedList']>('GET', `/api/me/shared-documents?limit=${limit}`),

  // workspaces and knowledge bases
  workspaces: () => request<S['WorkspaceList']>('GET', '/api/workspaces'),
  workspace: (id: string) => request<S['WorkspaceOut']>('GET', `/api/workspaces/${enc(id)}`),
  createWorkspace: (body: S['WorkspaceIn']) => request<S['WorkspaceOut']>('POST', '/api/workspaces', body),
  knowledgeBases: (workspaceId?: string) =>
    request<S['KnowledgeBaseList']>('GET', '/api/knowledge-bases' + (workspaceId ? `?workspace_id=${enc(workspaceId)}` : '')),
  knowledgeBase: (id: string) => request<S['KnowledgeBaseOut']>('GET', `/api/knowledge-bases/${enc(id)}`),
  updateWorkspace: (id: string, body: S['WorkspaceUpdate']) => request<S['WorkspaceOut']>('PUT', `/api/workspaces/${enc(id)}`, body),
  workspaceMembers: (id: string) => request<S['server__routers__content__MemberList']>('GET', `/api/workspaces/${enc(id)}/members`),
  addWorkspaceMember: (id: string, body: S['server__routers__content__MemberIn']) =>
    request<S['server__routers__content__MemberOut']>('POST', `/api/workspaces/${enc(id)}/members`, body),
  updateWorkspaceMember: (id: string, userId: string, body: S['MemberUpdate']) =>
    request<S['server__routers__content__MemberOut']>('PUT', `/api/workspaces/${enc(id)}/members/${enc(userId)}`, body),
  deleteKnowledgeBase: (id: string) => request<S['KnowledgeBaseDeleted']>('DELETE', `/api/knowledge-bases/${enc(id)}`),
  deleteWorkspace: (id: string) => request<S['WorkspaceDeleted']>('DELETE', `/api/workspaces/${enc(id)}`),
  transferOwner: (type: ObjectType, id: string, body: S['TransferIn']) =>
    request<void>('POST', `/api/objects/${type}/${enc(id)}/transfer-owner`, body),
  removeWorkspaceMember: (id: string, userId: string) => request<void>('DELETE', `/api/workspaces/${enc(id)}/members/${enc(userId)}`),
  kbIndexStatus: (kbId: string) => request<S['KbIndexStatus']>('GET', `/api/knowledge-bases/${enc(kbId)}/index-status`),
  kbIndexRetry: (kbId: string) => request<S['KbIndexRetried']>('POST', `/api/knowledge-bases/${enc(kbId)}/index-retry`),
  trash: (kbId: string) => request<S['TrashOut']>('GET', `/api/knowledge-bases/${enc(kbId)}/trash`),
  restoreFromTrash: (docId: string) => request<S['DocumentOut']>('POST', `/api/trash/${enc(docId)}/restore`),
  purge: (docId: string) => request<S['PurgeOut']>('DELETE', `/api/trash/${enc(docId)}`),
  createKnowledgeBase: (body: S['KnowledgeBaseIn']) => request<S['KnowledgeBaseOut']>('POST', '/api/knowledge-bases', body),
  updateKnowledgeBase: (id: string, body: S['KnowledgeBaseUpdate']) =>
    request<S['KnowledgeBaseOut']>('PUT', `/api/knowledge-bases/${enc(id)}`, body),
  tree: (kbId: string) => request<S['TreeOut']>('GET', `/api/knowledge-bases/${enc(kbId)}/tree`),

  // documents and versions
  document: (id: string) => request<S['DocumentOut']>('GET', `/api/documents/${enc(id)}`),
  createDocument: (body: S['DocumentIn']) => request<S['DocumentOut']>('POST', '/api/documents', body),
  /** A copy beside the page, or where `knowledge_base_id`/`parent_id` say; `with_children`: what is under it too. */
  duplicateDocument: (id: string, body: S['DuplicateIn'] = {}) =>
    request<S['DocumentOut']>('POST', `/api/documents/${enc(id)}/duplicate`, body),
  updateDocument: (id: string, body: S['DocumentUpdate']) => request<S['DocumentOut']>('PUT', `/api/documents/${enc(id)}`, body),
  deleteDocument: (id: string) => request<void>('DELETE', `/api/documents/${enc(id)}`),
  saveVersion: (id: string, body: S['VersionIn']) => request<S['SaveOut']>('POST', `/api/documents/${enc(id)}/versions`, body),
  /** Newest first; `before_no` pages on to older versions, `limit` (1-500) caps a page. */
  versions: (id: string, page: { before_no?: number; limit?: number } = {}) =>
    request<S['VersionList']>(
      'GET',
      `/api/documents/${enc(id)}/versions?${qs({ before_no: page.before_no?.toString(), limit: page.limit?.toString() })}`,
    ),
  version: (id: string, versionId: string) =>
    request<S['VersionDetail']>('GET', `/api/documents/${enc(id)}/versions/${enc(versionId)}`),
  restoreVersion: (id: string, versionId: string) =>
    request<S['SaveOut']>('POST', `/api/documents/${enc(id)}/restore/${enc(versionId)}`),
  upload: (form: FormData) => request<S['AssetOut']>('POST', '/api/uploads', form),

  // search
  search: (body: S['server__routers__search__SearchIn']) => request<S['SearchOut']>('POST', '/api/search', body),

  // sharing and invitations (docs/permissions.md)
  collaborators: (type: ObjectType, id: string) =>
    request<S['CollaboratorList']>('GET', `/api/objects/${type}/${enc(id)}/collaborators`),
  addCollaborator: (type: ObjectType, id: string, body: S['CollaboratorIn']) =>
    request<S['CollaboratorOut']>('POST', `/api/objects/${type}/${enc(id)}/collaborators`, body),
  collaboratorCandidates: (type: ObjectType, id: string, q: string) =>
    request<{ items: Candidate[] }>('GET', `/api/objects/${type}/${enc(id)}/collaborator-candidates?q=${enc(q)}`),
  shareLinks: (type: ObjectType, id: string) => request<S['ShareLinkList']>('GET', `/api/objects/${type}/${enc(id)}/share-links`),
  createShareLink: (type: ObjectType, id: string, body: S['ShareLinkIn']) =>
    request<S['CreatedShareLinkOut']>('POST', `/api/objects/${type}/${enc(id)}/share-links`, body),
  revokeShareLink: (linkId: string) => request<S['ShareLinkOut']>('POST', `/api/share-links/${enc(linkId)}/revoke`),
  invitations: (type: ObjectType, id: string) => request<S['InvitationList']>('GET', `/api/objects/${type}/${enc(id)}/invitations`),
  createInvitation: (type: ObjectType, id: string, body: S['InvitationIn']) =>
    request<S['CreatedInvitationOut']>('POST', `/api/objects/${type}/${enc(id)}/invitations`, body),
  revokeInvitation: (invitationId: string) => request<S['InvitationOut']>('POST', `/api/invitations/${enc(invitationId)}/revoke`),
  invitationRequests: (invitationId: string) => request<S['RequestList']>('GET', `/api/invitations/${enc(invitationId)}/requests`),
  approveRequest: (invitationId: string, requestId: string) =>
    request<S['RequestOut']>('POST', `/api/invitations/${enc(invitationId)}/approve`, { request_id: requestId }),
  rejectRequest: (invitationId: string, requestId: string) =>
    request<S['RequestOut']>('POST', `/api/invitations/${enc(invitationId)}/reject`, { request_id: requestId }),
  updateCollaborator: (collaboratorId: string, body: S['CollaboratorUpdate']) =>
    request<S['CollaboratorOut']>('PUT', `/api/collaborators/${enc(collaboratorId)}`, body),
  removeCollaborator: (collaboratorId: string) => request<void>('DELETE', `/api/collaborators/${enc(collaboratorId)}`),
  invitation: (token: string) => request<S['InvitationView']>('GET', `/api/invitations/${enc(token)}`),
  acceptInvitation: (token: string, body?: S['AcceptIn']) =>
    request<S['AcceptOut']>('POST', `/api/invitations/${enc(token)}/accept`, body ?? {}),
  shared: (token: string) => request<S['SharedOut']>('GET', `/api/share/${enc(token)}`),
  sharedDocument: (token: string, docId: string) =>
    request<Record<string, unknown>>('GET', `/api/share/${enc(token)}/documents/${enc(docId)}`),
  sharePassword: (token: string, password: string) =>
    request<S['ShareAccessOut']>('POST', `/api/share/${enc(token)}/verify-password`, { password }),
}
