/** Dialogs of the document page: version history, share links and collaborators (docs/permissions.md). */
import { useEffect, useState } from 'preact/hooks'
import { api, type Candidate, type ObjectType, type S } from '../api/client'
import { t, type MessageKey } from '../lib/i18n'
import { invalidate, useQuery } from '../lib/query'
import { Changes } from './Changes'
import { CopyButton, Dialog, ErrorNote, Field, Loading } from './ui'

/** Versions a page of the history loads at a time (the API's default page). */
const HISTORY_PAGE = 50

type Compare = 'previous' | 'current' | 'text'

/** Saves by one person less than this apart are one sitting (one row of the history). */
const SITTING_GAP_MS = 10 * 60 * 1000

/**
 * The versions (newest first) cut into sittings: consecutive saves by the same person, the same
 * way (typed, imported, through the API), each less than SITTING_GAP_MS after the one before.
 * Why: the editor saves after every pause, so an hour of typing is dozens of versions; a sitting
 * is what a reader of the history means by "a version".
 */
export function sittings(items: S['VersionSummary'][]): S['VersionSummary'][][] {
  const out: S['VersionSummary'][][] = []
  for (const v of items) {
    const group = out[out.length - 1]
    const newer = group?.[group.length - 1]
    if (
      newer &&
      newer.created_by === v.created_by &&
      newer.source_type === v.source_type &&
      Date.parse(newer.created_at) - Date.parse(v.created_at) < SITTING_GAP_MS
    )
      group.push(v)
    else out.push([v])
  }
  return out
}

function when(v: S['VersionSummary']): string {
  return new Date(v.created_at).toLocaleString()
}

/** "12/4/2026, 10:02:11 AM – 10:14:40 AM": the day once when the sitting is within one day. */
function span(oldest: S['VersionSummary'], newest: S['VersionSummary']): string {
  const a = new Date(oldest.created_at)
  const b = new Date(newest.created_at)
  return `${a.toLocaleString()} – ${a.toDateString() === b.toDateString() ? b.toLocaleTimeString() : b.toLocaleString()}`
}

/**
 * The page's versions, newest first, a page at a time (autosave makes many), and one of them shown
 * as what changed from the version before it, what changed since it (up to the current version),
 * or its full text (docs/web.md#version-history).
 */
export function HistoryDialog(props: {
  doc: S['DocumentOut']
  /** The version the editor last saved or loaded (`doc` is the page as it was opened). */
  currentVersionId: string | null
  canRestore: boolean
  /** Settles the page's unsaved edits before a restore; false: the restore is not made. */
  beforeRestore?: () => Promise<boolean>
  onClose: () => void
  onRestored: () => void
}) {
  const versions = useQuery(`versions:${props.doc.id}:${props.currentVersionId}`, () => api.versions(props.doc.id))
  const [older, setOlder] = useState<S['VersionSummary'][]>([])
  const [lastPage, setLastPage] = useState<number | null>(null) // size of the last page of older ones
  const [shown, setShown] = useState<S['VersionDetail'] | null>(null)
  const [compare, setCompare] = useState<Compare>('text')
  // what 'previous' compares with: the version before `base.no` (the shown one's own number, or
  // the first of its sitting when the sitting's row was viewed, `base.saves` its versions)
  const [base, setBase] = useState<{ no: number; saves: number }>({ no: 1, saves: 1 })
  const [open, setOpen] = useState<Set<string>>(new Set())
  const [other, setOther] = useState<{ key: string; version: S['VersionDetail'] | null } | null>(null)
  const [error, setError] = useState<unknown>(null)
  const items = [...(versions.data?.items ?? []), ...older]
  // every save and restore makes a new version the current one: the newest is current (someone
  // else's save since the editor's included)
  const currentId = items[0]?.id ?? props.currentVersionId
  const more = (lastPage ?? versions.data?.items.length ?? 0) === HISTORY_PAGE

  const otherKey = shown && compare !== 'text' ? `${shown.id}:${compare}:${compare === 'previous' ? base.no : currentId}` : null
  useEffect(() => {
    if (!shown || otherKey === null || other?.key === otherKey) return
    let live = true
    const load =
      compare === 'current'
        ? api.version(props.doc.id, currentId!)
        : api
            .versions(props.doc.id, { before_no: base.no, limit: 1 })
            .then((page) => (page.items[0] ? api.version(props.doc.id, page.items[0].id) : null))
    load.then((version) => live && setOther({ key: otherKey, version })).catch((e) => live && setError(e))
    return () => {
      live = false
    }
  }, [otherKey])

  /** Show version `id`; from a sitting's row, `from` is its first version (and `saves` its count). */
  function view(id: string, from?: { no: number; saves: number }) {
    setError(null)
    api
      .version(props.doc.id, id)
      .then((v) => {
        const b = from ?? { no: v.version_no, saves: 1 }
        setOther(null)
        setShown(v)
        setBase(b)
        setCompare(b.no > 1 ? 'previous' : 'text')
      })
      .catch(setError)
  }

  function restoreButton(v: S['VersionSummary']) {
    return props.canRestore && v.id !== currentId ? (
      <button
        type="button"
        onClick={async () => {
          if (props.beforeRestore && !(await props.beforeRestore())) return
          api
            .restoreVersion(props.doc.id, v.id)
            .then(() => {
              invalidate(`versions:${props.doc.id}`)
              props.onRestored()
            })
            .catch(setError)
        }}
      >
        {t('restore')}
      </button>
    ) : null
  }

  const source = (v: S['VersionSummary']) => (v.source_type !== 'manual' ? t(`versionSource_${v.source_type}` as MessageKey) : null)
  const current = (v: S['VersionSummary']) => (v.id === currentId ? <strong> · {t('versionCurrent')}</strong> : null)

  function row(v: S['VersionSummary']) {
    return (
      <li key={v.id} aria-current={shown?.id === v.id && base.saves === 1 ? 'true' : undefined}>
        <span>{t('versionLabel', { no: v.version_no })}</span>
        {current(v)}{' '}
        <span class="muted">
          {[v.created_by_name, when(v), source(v), v.chars != null ? t('versionChars', { n: v.chars }) : null].filter(Boolean).join(' · ')}
        </span>{' '}
        <button type="button" onClick={() => view(v.id)}>
          {t('view')}
        </button>
        {restoreButton(v)}
      </li>
    )
  }

  function sitting(group: S['VersionSummary'][]) {
    const newest = group[0]
    const oldest = group[group.length - 1]
    const range = { from: oldest.version_no, to: newest.version_no }
    const isOpen = open.has(newest.id)
    return (
      <li key={newest.id} class="sitting" aria-current={shown?.id === newest.id && base.no === oldest.version_no && base.saves > 1 ? 'true' : undefined}>
        <span>{t('versionRange', range)}</span>
        {current(newest)}{' '}
        <span class="muted">
          {[newest.created_by_name, span(oldest, newest), source(newest), t('versionSaves', { n: group.length })].filter(Boolean).join(' · ')}
        </span>{' '}
        <button type="button" onClick={() => view(newest.id, { no: oldest.version_no, saves: group.length })}>
          {t('view')}
        </button>
        {restoreButton(newest)}{' '}
        <button
          type="button"
          class="link-button"
          aria-expanded={isOpen}
          onClick={() =>
            setOpen((o) => {
              const n = new Set(o)
              if (isOpen) n.delete(newest.id)
              else n.add(newest.id)
              return n
            })
          }
        >
          {t('versionEachSave')}
        </button>
        {isOpen ? (
          <ul class="list" aria-label={t('versionRangeSaves', range)}>
            {group.map(row)}
          </ul>
        ) : null}
      </li>
    )
  }

  const loaded = other && other.key === otherKey ? other.version : undefined
  return (
    <Dialog title={t('history')} onClose={props.onClose} wide>
      {versions.loading ? <Loading /> : null}
      <ErrorNote error={versions.error ?? error} />
      {versions.data && items.length === 0 ? <p>{t('historyEmpty')}</p> : null}
      <div class="history">
        <ul class="list">
          {sittings(items).map((group) => (group.length === 1 ? row(group[0]) : sitting(group)))}
        </ul>
        {more && items.length ? (
          <button
            type="button"
            onClick={() =>
              api
                .versions(props.doc.id, { before_no: items[items.length - 1].version_no, limit: HISTORY_PAGE })
                .then((page) => {
                  setOlder((o) => [...o, ...page.items])
                  setLastPage(page.items.length)
                })
                .catch(setError)
            }
          >
            {t('historyOlder')}
          </button>
        ) : null}
        {shown ? (
          <section aria-label={t('versionLabel', { no: shown.version_no })}>
            <h3>{shown.title}</h3>
            <div class="modes" role="group" aria-label={t('changesShow')}>
              {base.no > 1 ? (
                <button type="button" aria-pressed={compare === 'previous'} onClick={() => setCompare('previous')}>
                  {base.saves > 1 ? t('changesInSitting', { n: base.saves }) : t('changesFromPrevious')}
                </button>
              ) : null}
              {shown.id !== currentId ? (
                <button type="button" aria-pressed={compare === 'current'} onClick={() => setCompare('current')}>
                  {t('changesSince')}
                </button>
              ) : null}
              <button type="button" aria-pressed={compare === 'text'} onClick={() => setCompare('text')}>
                {t('changesFullText')}
              </button>
            </div>
            {compare === 'text' ? (
              <pre>{shown.markdown}</pre>
            ) : loaded === undefined ? (
              <Loading />
            ) : loaded === null ? (
              <p class="muted">{t('changesNoPrevious')}</p>
            ) : compare === 'previous' ? (
              <Changes
                label={t('changesFromVersion', { from: loaded.version_no, to: shown.version_no })}
                before={{ title: loaded.title, markdown: loaded.markdown ?? '' }}
                after={{ title: shown.title, markdown: shown.markdown ?? '' }}
              />
            ) : (
              <Changes
                label={t('changesFromVersion', { from: shown.version_no, to: loaded.version_no })}
                before={{ title: shown.title, markdown: shown.markdown ?? '' }}
                after={{ title: loaded.title, markdown: loaded.markdown ?? '' }}
              />
            )}
          </section>
        ) : null}
      </div>
      <div class="actions">
        <button type="button" onClick={props.onClose}>
          {t('close')}
        </button>
      </div>
    </Dialog>
  )
}

const CONTENT_ROLES: S['CollaboratorUpdate']['role'][] = ['manager', 'editor', 'viewer']

function InvitationsSection(props: { objectType: ObjectType; objectId: string }) {
  const key = `share:${props.objectType}:${props.objectId}:invitations`
  const list = useQuery(key, () => api.invitations(props.objectType, props.objectId))
  const [role, setRole] = useState<S['CollaboratorUpdate']['role']>('viewer')
  const [approval, setApproval] = useState(false)
  const [maxUses, setMaxUses] = useState('')
  const [expires, setExpires] = useState('')
  const [created, setCreated] = useState<S['CreatedInvitationOut'] | null>(null)
  const [requests, setRequests] = useState<Record<string, S['RequestOut'][]>>({})
  const [error, setError] = useState<unknown>(null)
  const loadRequests = (id: string) => api.invitationRequests(id).then((r) => setRequests((m) => ({ ...m, [id]: r.items }))).catch(setError)
  return (
    <section aria-labelledby="inv-h">
      <h3 id="inv-h">{t('invitationLinks')}</h3>
      {list.data && list.data.items.length === 0 ? <p class="muted">{t('noInvitations')}</p> : null}
      <ul class="list">
        {list.data?.items.map((i) => (
          <li key={i.id}>
            <span>{t(`role_${i.role}` as MessageKey)}</span> <span class="tag">{t(`invitationStatus_${i.status}` as MessageKey)}</span>{' '}
            <span class="muted">{t('invitationUses', { used: i.used_count })}</span>{' '}
            {i.expires_at ? <span class="tag">{t('linkExpiresAt', { date: new Date(i.expires_at).toLocaleString() })}</span> : null}
            {i.pending_requests > 0 ? (
              <button type="button" onClick={() => void loadRequests(i.id)}>
                {t('invitationPending', { n: i.pending_requests })}
              </button>
            ) : null}
            {i.status === 'pending' ? (
              <button type="button" onClick={() => api.revokeInvitation(i.id).then(() => invalidate(key)).catch(setError)}>
                {t('revoke')}
              </button>
            ) : null}
            {(requests[i.id] ?? []).map((r) => (
              <div key={r.id}>
                <span class="muted">{r.user_id.slice(0, 8)}</span>{' '}
                <button type="button" onClick={() => api.approveRequest(i.id, r.id).then(() => { invalidate(key); void loadRequests(i.id) }).catch(setError)}>
                  {t('approve')}
                </button>
                <button type="button" onClick={() => api.rejectRequest(i.id, r.id).then(() => { invalidate(key); void loadRequests(i.id) }).catch(setError)}>
                  {t('reject')}
                </button>
              </div>
            ))}
          </li>
        ))}
      </ul>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          setError(null)
          api
            .createInvitation(props.objectType, props.objectId, {
              role,
              require_approval: approval,
              max_uses: maxUses ? Number(maxUses) : null,
              expires_at: expires ? new Date(expires).toISOString() : null,
            })
            .then((c) => {
              setCreated(c)
              invalidate(key)
            })
            .catch(setError)
        }}
      >
        <div class="field">
          <label for="inv-role">{t('invitationRole')}</label>
          <select id="inv-role" value={role} onChange={(e) => setRole((e.target as HTMLSelectElement).value as typeof role)}>
            {CONTENT_ROLES.map((r) => (
              <option key={r} value={r}>
                {t(`role_${r}` as MessageKey)}
              </option>
            ))}
          </select>
        </div>
        <div class="field check">
          <input id="inv-approval" type="checkbox" checked={approval} onChange={(e) => setApproval((e.target as HTMLInputElement).checked)} />
          <label for="inv-approval">{t('invitationRequireApproval')}</label>
        </div>
        <Field label={t('invitationMaxUses')} name="inv-max-uses" value={maxUses} onInput={setMaxUses} />
        <Field label={t('linkExpires')} name="inv-expires" type="datetime-local" value={expires} onInput={setExpires} />
        <button type="submit">{t('createInvitation')}</button>
      </form>
      {created ? (
        <p role="status">
          {t('invitationCreated')} <input readOnly aria-label={t('invitationLinks')} class="url" value={created.url} />
        </p>
      ) : null}
      <ErrorNote error={error ?? list.error} />
    </section>
  )
}

/**
 * A document's permission mode and own visibility (docs/permissions.md#visibility): *inherit*
 * follows its knowledge base or nearest custom folder; *custom* gives it collaborators,
 * invitations and optionally a visibility of its own. Offered to its managers only.
 */
function DocumentAccess(props: {
  docId: string
  mode: string
  visibility: string | null
  onChanged: () => void
  onError: (e: unknown) => void
}) {
  const update = (body: S['DocumentUpdate']) => api.updateDocument(props.docId, body).then(props.onChanged).catch(props.onError)
  return (
    <section aria-labelledby="access-h">
      <h3 id="access-h">{t('permissionMode')}</h3>
      <div class="field">
        <label for="doc-mode">{t('permissionMode')}</label>
        <select id="doc-mode" value={props.mode} onChange={(e) => void update({ permission_mode: (e.target as HTMLSelectElement).value as 'inherit' | 'custom' })}>
          <option value="inherit">{t('permissionMode_inherit')}</option>
          <option value="custom">{t('permissionMode_custom')}</option>
        </select>
      </div>
      {props.mode === 'custom' ? (
        <div class="field">
          <label for="doc-visibility">{t('visibility')}</label>
          <select
            id="doc-visibility"
            value={props.visibility ?? ''}
            onChange={(e) => void update({ visibility: (e.target as HTMLSelectElement).value as S['KnowledgeBaseUpdate']['visibility'] })}
          >
            {props.visibility === null ? <option value="">{t('visibilityInherited')}</option> : null}
            {(['private', 'workspace', 'public'] as const).map((v) => (
              <option key={v} value={v}>
                {t(`visibility_${v}` as MessageKey)}
              </option>
            ))}
          </select>
        </div>
      ) : null}
    </section>
  )
}

/**
 * The collaborators, by name and email; for managers a role select, removal, and a picker that
 * searches the workspace's members and the tenant's groups (the server decides who may be
 * seen: GET .../collaborator-candidates).
 */
function CollaboratorsSection(props: { objectType: ObjectType; objectId: string; canManage: boolean }) {
  const key = `share:${props.objectType}:${props.objectId}`
  const collaborators = useQuery(`${key}:collaborators`, () => api.collaborators(props.objectType, props.objectId))
  const [q, setQ] = useState('')
  const [role, setRole] = useState<S['CollaboratorUpdate']['role']>('viewer')
  const [error, setError] = useState<unknown>(null)
  const candidates = useQuery(props.canManage ? `${key}:candidates:${q.trim()}` : null, () =>
    api.collaboratorCandidates(props.objectType, props.objectId, q.trim()),
  )
  const present = new Set((collaborators.data?.items ?? []).map((c) => `${c.subject_type}:${c.subject_id}`))
  const offered = (candidates.data?.items ?? []).filter((c: Candidate) => !present.has(`${c.subject_type}:${c.subject_id}`))
  const add = (c: Candidate) => {
    setError(null)
    api
      .addCollaborator(props.objectType, props.objectId, { subject_type: c.subject_type, subject_id: c.subject_id, role })
      .then(() => invalidate(key))
      .catch(setError)
  }
  return (
    <section aria-labelledby="collab-h">
      <h3 id="collab-h">{t('collaborators')}</h3>
      {collaborators.data && collaborators.data.items.length === 0 ? <p class="muted">{t('noCollaborators')}</p> : null}
      <ul class="list" aria-label={t('collaborators')}>
        {collaborators.data?.items.map((c) => (
          <li key={c.id}>
            <span>{c.subject_name ?? `${c.subject_type} ${c.subject_id.slice(0, 8)}`}</span>{' '}
            {c.subject_type === 'group' ? <span class="tag">{t('groupTag')}</span> : null}
            {c.subject_email ? <span class="muted">{c.subject_email}</span> : null}{' '}
            {props.canManage && c.role !== 'owner' ? (
              <>
                <select
                  aria-label={t('role')}
                  value={c.role}
                  onChange={(e) =>
                    api
                      .updateCollaborator(c.id, { role: (e.target as HTMLSelectElement).value as S['CollaboratorUpdate']['role'] })
                      .then(() => invalidate(key))
                      .catch(setError)
                  }
                >
                  {CONTENT_ROLES.map((r) => (
                    <option key={r} value={r}>
                      {t(`role_${r}` as MessageKey)}
                    </option>
                  ))}
                </select>{' '}
                <button type="button" onClick={() => api.removeCollaborator(c.id).then(() => invalidate(key)).catch(setError)}>
                  {t('remove')}
                </button>
              </>
            ) : (
              <span class="muted">{t(`role_${c.role}` as MessageKey)}</span>
            )}
          </li>
        ))}
      </ul>
      {props.canManage ? (
        <div class="picker">
          <div class="field">
            <label for="collab-search">{t('addPeople')}</label>
            <input id="collab-search" type="search" value={q} placeholder={t('searchUsers')} onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
          </div>
          <div class="field">
            <label for="collab-role">{t('addAs')}</label>
            <select id="collab-role" value={role} onChange={(e) => setRole((e.target as HTMLSelectElement).value as typeof role)}>
              {CONTENT_ROLES.map((r) => (
                <option key={r} value={r}>
                  {t(`role_${r}` as MessageKey)}
                </option>
              ))}
            </select>
          </div>
          {candidates.data && offered.length === 0 ? <p class="muted">{t('noCandidates')}</p> : null}
          <ul class="list" aria-label={t('addPeople')}>
            {offered.map((c) => (
              <li key={`${c.subject_type}:${c.subject_id}`}>
                <span>{c.name}</span> {c.subject_type === 'group' ? <span class="tag">{t('groupTag')}</span> : null}
                {c.email ? <span class="muted">{c.email}</span> : null}{' '}
                <button type="button" aria-label={t('addNamed', { name: c.name })} onClick={() => add(c)}>
                  {t('add')}
                </button>
              </li>
            ))}
          </ul>
        </div>
      ) : null}
      <ErrorNote error={error ?? collaborators.error ?? candidates.error} />
    </section>
  )
}

export function ShareDialog(props: {
  objectType: ObjectType
  objectId: string
  canShare: boolean
  canManage: boolean
  /** the knowledge base's visibility, offered for change to its managers */
  visibility?: S['KnowledgeBaseUpdate']['visibility']
  /** a document's permission mode and own visibility, offered for change to its managers */
  permissionMode?: string
  docVisibility?: string | null
  /** after the document's mode or visibility changed (the page reloads it) */
  onChanged?: () => void
  onClose: () => void
}) {
  const key = `share:${props.objectType}:${props.objectId}`
  const links = useQuery(`${key}:links`, () => api.shareLinks(props.objectType, props.objectId))
  // a document has collaborators and invitations of its own only in custom mode (docs/permissions.md#visibility)
  const manageCollaborators = props.canManage && (props.objectType !== 'document' || props.permissionMode === 'custom')
  const [password, setPassword] = useState('')
  const [expires, setExpires] = useState('')
  const [membersOnly, setMembersOnly] = useState(false)
  const [created, setCreated] = useState<S['CreatedShareLinkOut'] | null>(null)
  const [error, setError] = useState<unknown>(null)
  // the server's link (APP_BASE_URL's, as in mail): the address people outside reach, which the
  // page's own origin is not when an admin works through another one (an internal name, a tunnel)
  const url = created ? created.url : ''
  return (
    <Dialog title={t('shareAndCollaborate')} onClose={props.onClose} wide>
      {props.objectType === 'knowledge_base' && props.canManage && props.visibility ? (
        <div class="field">
          <label for="kb-visibility-edit">{t('visibility')}</label>
          <select
            id="kb-visibility-edit"
            value={props.visibility}
            onChange={(e) =>
              api
                .updateKnowledgeBase(props.objectId, { visibility: (e.target as HTMLSelectElement).value as S['KnowledgeBaseUpdate']['visibility'] })
                .then(() => invalidate(`kb:${props.objectId}`))
                .catch(setError)
            }
          >
            {(['private', 'workspace', 'public'] as const).map((v) => (
              <option key={v} value={v}>
                {t(`visibility_${v}` as MessageKey)}
              </option>
            ))}
          </select>
        </div>
      ) : null}
      {props.objectType === 'document' && props.canManage ? (
        <DocumentAccess
          docId={props.objectId}
          mode={props.permissionMode ?? 'inherit'}
          visibility={props.docVisibility ?? null}
          onChanged={() => {
            invalidate(key)
            props.onChanged?.()
          }}
          onError={setError}
        />
      ) : null}
      {props.canShare ? (
      <section aria-labelledby="links-h">
        <h3 id="links-h">{t('shareLinks')}</h3>
        {links.loading ? <Loading /> : null}
        {links.data && links.data.items.length === 0 ? <p class="muted">{t('noShareLinks')}</p> : null}
        <ul class="list">
          {links.data?.items.map((l) => (
            <li key={l.id}>
              <span>{new Date(l.created_at).toLocaleString()}</span>{' '}
              {l.has_password ? <span class="tag">{t('linkHasPassword')}</span> : null}
              {l.expires_at ? <span class="tag">{t('linkExpiresAt', { date: new Date(l.expires_at).toLocaleString() })}</span> : null}
              {l.revoked_at ? (
                <span class="tag">{t('linkClosed')}</span>
              ) : (
                <button type="button" onClick={() => api.revokeShareLink(l.id).then(() => invalidate(key)).catch(setError)}>
                  {t('closeLink')}
                </button>
              )}
            </li>
          ))}
        </ul>
        <form
          onSubmit={(e) => {
            e.preventDefault()
            setError(null)
            api
              .createShareLink(props.objectType, props.objectId, {
                permission: 'view',
                require_login: false,
                password: password || null,
                restrict_to_workspace_members: membersOnly,
                expires_at: expires ? new Date(expires).toISOString() : null,
              })
              .then((c) => {
                setCreated(c)
                invalidate(key)
              })
              .catch(setError)
          }}
        >
          <Field label={t('linkPassword')} name="link-password" type="password" value={password} onInput={setPassword} autoComplete="new-password" minLength={4} />
          <Field label={t('linkExpires')} name="link-expires" type="datetime-local" value={expires} onInput={setExpires} />
          <div class="field check">
            <input id="link-members" type="checkbox" checked={membersOnly} onChange={(e) => setMembersOnly((e.target as HTMLInputElement).checked)} />
            <label for="link-members">{t('linkMembersOnly')}</label>
          </div>
          <button type="submit" class="primary">
            {t('createShareLink')}
          </button>
        </form>
        {created ? (
          <p role="status">
            {t('linkCreated')}{' '}
            <input readOnly aria-label={t('shareLinks')} value={url} class="url" />{' '}
            <CopyButton text={url} label={t('copyUrl')} />
          </p>
        ) : null}
      </section>
      ) : null}
      {manageCollaborators ? <InvitationsSection objectType={props.objectType} objectId={props.objectId} /> : null}
      <CollaboratorsSection objectType={props.objectType} objectId={props.objectId} canManage={manageCollaborators} />
      <ErrorNote error={error ?? links.error} />
      <div class="actions">
        <button type="button" onClick={props.onClose}>
          {t('close')}
        </button>
      </div>
    </Dialog>
  )
}
