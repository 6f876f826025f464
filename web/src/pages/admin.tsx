/**
 * /admin: the admin console (docs/web.md#admin-console), for system_admin and tenant_admin only.
 * Everyone else gets the app's ordinary not-found page (the console's existence is not a secret,
 * the REST routes say 403, but the app shows nothing it can't use).
 *
 * Admins see configuration, never private content (docs/permissions.md): nothing here reads a
 * document. Lists are paginated by the server (limit/offset). A rebuild's progress is polled
 * from `GET /api/admin/milvus/rebuild-jobs`, so it survives a reload: the page asks the server
 * which jobs are running instead of remembering them.
 */
import { useEffect, useState } from 'preact/hooks'
import { api, ApiError, type S } from '../api/client'
import { Choice, TimeZoneField } from '../components/forms'
import { CopyButton, ErrorNote, Loading, PublicFrame, TopBar } from '../components/ui'
import { t, type MessageKey } from '../lib/i18n'
import { invalidate, useQuery } from '../lib/query'
import { navigate, paths, type Route } from '../lib/router'
import { useSession } from '../lib/session'

const PAGE = 25
const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—')

export function isAdmin(me: S['MeOut']): boolean {
  return me.tenant_roles.some((r) => r.role === 'system_admin' || (r.role === 'tenant_admin' && r.tenant_id === me.tenant_id))
}

const TABS = ['users', 'registration', 'audit', 'imports', 'index', 'dify', 'mcp', 'groups'] as const
type Tab = (typeof TABS)[number]
/** The console's addresses in the product's route list (docs/web.md#admin-console), each the tab
 * that holds it: a bookmark or a link from the docs opens the right tab, not the users list. */
const ALIASES: Record<string, Tab> = {
  'auth-settings': 'registration',
  'audit-logs': 'audit',
  milvus: 'index',
  'milvus/rebuild-jobs': 'index',
}

function Pager(props: { offset: number; total: number; limit: number; onOffset: (o: number) => void }) {
  const { offset, total, limit } = props
  return (
    <p class="pager">
      <button type="button" disabled={offset === 0} onClick={() => props.onOffset(Math.max(0, offset - limit))}>
        {t('previous')}
      </button>{' '}
      <span>{t('pageRange', { from: total ? offset + 1 : 0, to: Math.min(offset + limit, total), total })}</span>{' '}
      <button type="button" disabled={offset + limit >= total} onClick={() => props.onOffset(offset + limit)}>
        {t('next')}
      </button>
    </p>
  )
}

const USER_STATUSES = ['', 'pending_email_verification', 'pending_activation', 'active', 'suspended', 'deleted'] as const

function UsersTab() {
  const session = useSession()
  const meId = session.status === 'signed-in' ? session.me.user.id : null
  const [q, setQ] = useState('')
  const [query, setQuery] = useState('')
  const [status, setStatus] = useState<(typeof USER_STATUSES)[number]>('')
  const [offset, setOffset] = useState(0)
  const [error, setError] = useState<unknown>(null)
  const key = `admin:users:${status}:${query}:${offset}`
  const users = useQuery(key, () => api.adminUsers({ q: query, status, limit: PAGE, offset }))
  const act = (p: Promise<unknown>) =>
    p.then(() => invalidate('admin:users')).then(() => invalidate('admin:audit')).catch(setError)
  /** Delete; when the user owns content the server says so (409 owns_content) and the admin
   * names a successor by email, resolved to an id through the same users list. */
  const remove = async (u: S['AdminUserOut']) => {
    if (!confirm(t('deleteUserConfirm', { name: u.email }))) return
    try {
      await api.adminDeleteUser(u.id)
    } catch (e) {
      if (!(e instanceof ApiError && e.body.reason === 'owns_content')) throw e
      const email = prompt(t('successorPrompt', { name: u.email, workspaces: Number(e.body.workspaces), objects: Number(e.body.objects) }))
      if (!email) return
      const found = await api.adminUsers({ q: email.trim(), status: 'active', limit: 10, offset: 0 })
      const heir = found.items.find((x) => x.email === email.trim().toLowerCase())
      if (!heir) throw new ApiError(404, { error: 'SUCCESSOR_NOT_FOUND', detail: t('successorNotFound', { email }) })
      await api.adminDeleteUser(u.id, { successor_id: heir.id })
    }
  }
  return (
    <section aria-labelledby="users-h">
      <h2 id="users-h">{t('adminUsers')}</h2>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault()
          setOffset(0)
          setQuery(q)
        }}
      >
        <input type="search" aria-label={t('searchUsers')} placeholder={t('searchUsers')} value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
        <label>
          {t('status')}{' '}
          <Choice
            options={USER_STATUSES}
            value={status}
            onChange={(v) => {
              setOffset(0)
              setStatus(v)
            }}
            label={(v) => (v ? t(`userStatus_${v}` as MessageKey) : t('all'))}
          />
        </label>{' '}
        <button type="submit">{t('search')}</button>
      </form>
      {users.loading ? <Loading /> : null}
      <ErrorNote error={users.error ?? error} />
      <table class="grid" aria-labelledby="users-h">
        <thead>
          <tr>
            <th>{t('email')}</th>
            <th>{t('displayName')}</th>
            <th>{t('status')}</th>
            <th>{t('tenant')}</th>
            <th>{t('role')}</th>
            <th>{t('created')}</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {users.data?.items.map((u) => (
            <tr key={`${u.id}:${u.tenant_id}`}>
              <td>{u.email}</td>
              <td>{u.display_name}</td>
              <td>{t(`userStatus_${u.status}` as MessageKey)}</td>
              <td class="small">{u.tenant_slug}</td>
              <td>{t(`role_${u.role}` as MessageKey)}</td>
              <td>{when(u.created_at)}</td>
              {u.id === meId ? (
                // the server refuses an administrator's own status, role or deletion: no button that can only fail
                <td class="row-actions muted" title={t('thisIsYouHint')}>
                  {t('thisIsYou')}
                </td>
              ) : (
              <td class="row-actions">
                {/* a sign-up whose verification mail never arrived is activated too: the admin vouches for the address */}
                {u.status === 'pending_activation' || u.status === 'pending_email_verification' || u.status === 'suspended' ? (
                  <button type="button" aria-label={t('activateNamed', { name: u.email })} onClick={() => act(api.adminActivate(u.id))}>
                    {t('activate')}
                  </button>
                ) : null}
                {u.status === 'active' ? (
                  <button type="button" aria-label={t('suspendNamed', { name: u.email })} onClick={() => confirm(t('suspendConfirm', { name: u.email })) && act(api.adminSuspend(u.id))}>
                    {t('suspend')}
                  </button>
                ) : null}
                {u.status === 'pending_activation' || u.status === 'pending_email_verification' ? (
                  <button type="button" aria-label={t('rejectNamed', { name: u.email })} onClick={() => confirm(t('rejectConfirm', { name: u.email })) && act(api.adminReject(u.id))}>
                    {t('reject')}
                  </button>
                ) : null}
                {u.role === 'member' && u.status === 'active' ? (
                  <button type="button" aria-label={t('makeAdminNamed', { name: u.email })} onClick={() => confirm(t('makeAdminConfirm', { name: u.email })) && act(api.adminSetRole(u.id, { role: 'tenant_admin', tenant_id: u.tenant_id }))}>
                    {t('makeAdmin')}
                  </button>
                ) : null}
                {u.role === 'tenant_admin' ? (
                  <button type="button" aria-label={t('makeMemberNamed', { name: u.email })} onClick={() => act(api.adminSetRole(u.id, { role: 'member', tenant_id: u.tenant_id }))}>
                    {t('makeMember')}
                  </button>
                ) : null}
                {u.status !== 'deleted' ? (
                  <button type="button" class="danger" aria-label={t('deleteUserNamed', { name: u.email })} onClick={() => act(remove(u))}>
                    {t('delete')}
                  </button>
                ) : null}
                {u.status === 'pending_email_verification' ? (
                  <button type="button" aria-label={t('resendNamed', { name: u.email })} onClick={() => act(api.adminResendVerification(u.id))}>
                    {t('resendVerification')}
                  </button>
                ) : null}
              </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {users.data ? <Pager offset={offset} total={users.data.total} limit={PAGE} onOffset={setOffset} /> : null}
    </section>
  )
}

type Settings = S['AuthSettingsOut']
const BOOL_SETTINGS = ['registration_enabled', 'email_verification_required', 'invited_user_auto_active', 'invite_required', 'first_user_becomes_admin'] as const

function RegistrationTab() {
  const settings = useQuery('admin:auth-settings', () => api.authSettings())
  // the first sign-up becoming system_admin is a system_admin's decision (docs/accounts.md#registration-settings)
  const session = useSession()
  const systemAdmin = session.status === 'signed-in' && session.me.tenant_roles.some((r) => r.role === 'system_admin')
  const [draft, setDraft] = useState<Settings | null>(null)
  const [domains, setDomains] = useState('')
  const [saved, setSaved] = useState(false)
  const [error, setError] = useState<unknown>(null)
  useEffect(() => {
    if (settings.data) {
      setDraft(settings.data)
      setDomains((settings.data.allowed_email_domains ?? []).join(', '))
    }
  }, [settings.data])
  if (!draft) return settings.error ? <ErrorNote error={settings.error} /> : <Loading />
  const d = draft
  const set = (patch: Partial<Settings>) => {
    setSaved(false)
    setDraft({ ...d, ...patch })
  }
  return (
    <section aria-labelledby="reg-h">
      <h2 id="reg-h">{t('registrationSettings')}</h2>
      <p class="muted">{d.source === 'tenant' ? t('settingsSourceTenant') : t('settingsSourceInstance')}</p>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          setError(null)
          const list = domains
            .split(/[\s,]+/)
            .map((x) => x.trim())
            .filter(Boolean)
          api
            .updateAuthSettings({
              registration_enabled: d.registration_enabled,
              email_verification_required: d.email_verification_required,
              default_signup_status: d.default_signup_status as 'active' | 'pending_activation',
              invited_user_auto_active: d.invited_user_auto_active,
              invite_required: d.invite_required,
              first_user_becomes_admin: d.first_user_becomes_admin,
              allowed_email_domains: list.length ? list : null,
            })
            .then(() => {
              setSaved(true)
              invalidate('admin:auth-settings')
              invalidate('admin:audit')
            })
            .catch(setError)
        }}
      >
        {BOOL_SETTINGS.map((k) => (
          <div class="field check" key={k}>
            <input
              id={`set-${k}`}
              type="checkbox"
              checked={d[k]}
              disabled={k === 'first_user_becomes_admin' && !systemAdmin}
              title={k === 'first_user_becomes_admin' && !systemAdmin ? t('settingSystemAdminOnly') : undefined}
              onChange={(e) => set({ [k]: (e.target as HTMLInputElement).checked } as Partial<Settings>)}
            />
            <label for={`set-${k}`}>{t(`setting_${k}` as MessageKey)}</label>
          </div>
        ))}
        <div class="field">
          <label for="set-default-status">{t('setting_default_signup_status')}</label>
          <select id="set-default-status" value={d.default_signup_status} onChange={(e) => set({ default_signup_status: (e.target as HTMLSelectElement).value })}>
            <option value="active">{t('userStatus_active')}</option>
            <option value="pending_activation">{t('userStatus_pending_activation')}</option>
          </select>
        </div>
        <div class="field">
          <label for="set-domains">{t('setting_allowed_email_domains')}</label>
          <input id="set-domains" value={domains} onInput={(e) => (setSaved(false), setDomains((e.target as HTMLInputElement).value))} placeholder="example.com, example.org" />
        </div>
        <ErrorNote error={error} />
        <button type="submit" class="primary">
          {t('save')}
        </button>
        {saved ? <span role="status"> {t('saved')}</span> : null}
        {d.source === 'tenant' && d.tenant_id ? (
          <button
            type="button"
            onClick={() =>
              api
                .resetAuthSettings(d.tenant_id!)
                .then(() => invalidate('admin:auth-settings'))
                .catch(setError)
            }
          >
            {t('useInstanceDefault')}
          </button>
        ) : null}
      </form>
    </section>
  )
}

/**
 * The tenant's default time zone (docs/accounts.md#tenant-settings), for members who set none on
 * their profile: their apps' daily quotas count its local day. Empty = UTC. An unknown zone is a
 * 422 on `time_zone`, shown under the field like on the profile.
 */
function TenantZoneSection() {
  const current = useQuery('admin:tenant-settings', () => api.tenantSettings())
  const [zone, setZone] = useState<string | null>(null)
  const [saved, setSaved] = useState(false)
  const [error, setError] = useState<unknown>(null)
  if (!current.data) return current.error ? <ErrorNote error={current.error} /> : <Loading />
  const value = zone ?? current.data.time_zone ?? ''
  const zoneError = error instanceof ApiError && error.body.field === 'time_zone' ? error : null
  return (
    <section aria-labelledby="tenant-zone-h">
      <h2 id="tenant-zone-h">{t('tenantTimeZone')}</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          setError(null)
          api
            .updateTenantSettings({ time_zone: value.trim() || null })
            .then(() => {
              setSaved(true)
              setZone(null)
              invalidate('admin:tenant-settings')
              invalidate('admin:audit')
            })
            .catch(setError)
        }}
      >
        <TimeZoneField
          id="f-tenant-zone"
          name="tenant-zone"
          label={t('tenantTimeZone')}
          help={t('tenantTimeZoneHelp')}
          value={value}
          onInput={(v) => (setZone(v), setSaved(false))}
          error={zoneError ? zoneError.detail : null}
          useBrowser={(z) => t('timeZoneUseBrowser', { zone: z })}
        />
        <ErrorNote error={zoneError ? null : error} />
        <button type="submit" class="primary">
          {t('saveTimeZone')}
        </button>
        {saved ? <span role="status"> {t('saved')}</span> : null}
      </form>
    </section>
  )
}

interface AuditFilter {
  action: string
  object_type: string
  object_id: string
  actor: string
  since: string
}
const NO_FILTER: AuditFilter = { action: '', object_type: '', object_id: '', actor: '', since: '' }

function auditParams(f: AuditFilter): Record<string, string> {
  const p: Record<string, string> = {}
  for (const [k, v] of Object.entries(f)) if (v) p[k] = k === 'since' ? new Date(v).toISOString() : v
  return p
}

const csvCell = (v: unknown) => {
  const s = v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v)
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s
}

/** Every row matching the filter, page by page (the server caps a page), as CSV text. */
async function auditCsv(f: AuditFilter): Promise<string> {
  const cols = ['created_at', 'actor_type', 'actor_user_id', 'actor_email', 'action', 'object_type', 'object_id', 'ip', 'metadata'] as const
  const lines = [cols.join(',')]
  let offset: number | null = 0
  while (offset !== null) {
    const page: S['AuditLogList'] = await api.auditLogs({ ...auditParams(f), limit: '200', offset: String(offset) })
    for (const r of page.items) lines.push(cols.map((c) => csvCell(r[c])).join(','))
    offset = page.next_offset ?? null
  }
  return lines.join('\r\n') + '\r\n'
}

function AuditTab() {
  const [form, setForm] = useState<AuditFilter>(NO_FILTER)
  const [filter, setFilter] = useState<AuditFilter>(NO_FILTER)
  const [offset, setOffset] = useState(0)
  const [error, setError] = useState<unknown>(null)
  const logs = useQuery(`admin:audit:${JSON.stringify(filter)}:${offset}`, () =>
    api.auditLogs({ ...auditParams(filter), limit: String(PAGE), offset: String(offset) }),
  )
  const input = (k: keyof AuditFilter, label: MessageKey, type: 'text' | 'datetime-local' = 'text') => (
    <label>
      {t(label)}{' '}
      {type === 'text' ? (
        <input type="text" name={`audit-${k}`} value={form[k]} onInput={(e) => setForm({ ...form, [k]: (e.target as HTMLInputElement).value })} />
      ) : (
        <input type="datetime-local" name={`audit-${k}`} value={form[k]} onInput={(e) => setForm({ ...form, [k]: (e.target as HTMLInputElement).value })} />
      )}
    </label>
  )
  return (
    <section aria-labelledby="audit-h">
      <h2 id="audit-h">{t('auditLog')}</h2>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault()
          setOffset(0)
          setFilter(form)
        }}
      >
        {input('actor', 'auditActorFilter')} {input('action', 'auditAction')} {input('object_type', 'auditObjectType')}{' '}
        {input('object_id', 'auditObjectId')} {input('since', 'auditSince', 'datetime-local')}{' '}
        <button type="submit">{t('filter')}</button>{' '}
        <button
          type="button"
          onClick={() =>
            auditCsv(filter)
              .then((csv) => {
                const a = document.createElement('a')
                a.href = URL.createObjectURL(new Blob([csv], { type: 'text/csv' }))
                a.download = 'openkb-audit.csv'
                a.click()
                setTimeout(() => URL.revokeObjectURL(a.href), 10_000)
              })
              .catch(setError)
          }
        >
          {t('exportCsv')}
        </button>
      </form>
      {logs.loading ? <Loading /> : null}
      <ErrorNote error={logs.error ?? error} />
      <table class="grid" aria-labelledby="audit-h">
        <thead>
          <tr>
            <th>{t('auditTime')}</th>
            <th>{t('auditActor')}</th>
            <th>{t('auditAction')}</th>
            <th>{t('auditObject')}</th>
            <th>{t('auditDetails')}</th>
          </tr>
        </thead>
        <tbody>
          {logs.data?.items.map((r) => (
            <tr key={r.id}>
              <td>{when(r.created_at)}</td>
              <td>
                {r.actor_email ?? r.actor_type} <span class="muted small">{r.actor_email ? '' : (r.actor_user_id ?? '')}</span>
              </td>
              <td>{r.action}</td>
              <td>
                {r.object_type ?? ''} <span class="muted">{r.object_id ?? ''}</span>
              </td>
              <td class="muted small">{JSON.stringify(r.metadata)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {logs.data ? <Pager offset={offset} total={logs.data.total} limit={PAGE} onOffset={setOffset} /> : null}
    </section>
  )
}

type Json = Record<string, unknown>
type Job = { id: string; status: string; target_collection: string; switch_on_success: boolean; total_chunks: number | null; processed_chunks: number | null; error: string | null; started_at: string | null; finished_at: string | null }
type Profile = { id: string; name: string; status: string; collection: string; active: boolean; vector_dim: number; functions: { embedding: Json | null; bm25: Json; rerank: Json | null } }
const RUNNING = new Set(['pending', 'running'])

/** A new profile: names and shapes only. There is deliberately no field for a provider key
 * (Milvus holds it, docs/retrieval.md#principles); the server refuses key-like fields anyway. */
function NewProfileForm({ profiles, onCreated, onError }: { profiles: string[]; onCreated: () => void; onError: (e: unknown) => void }) {
  const [name, setName] = useState('')
  const [like, setLike] = useState('')
  const [model, setModel] = useState('')
  const [dim, setDim] = useState('')
  const [provider, setProvider] = useState('openai')
  const [endpoint, setEndpoint] = useState('')
  // with "same functions as" the server copies them (docs/retrieval.md#index-profiles): the fields are not sent
  const text = (id: string, label: MessageKey, value: string, set: (v: string) => void) => (
    <label>
      {t(label)} <input id={id} value={value} disabled={!!like} onInput={(e) => set((e.target as HTMLInputElement).value)} />
    </label>
  )
  return (
    <form
      class="filters"
      aria-label={t('newProfile')}
      onSubmit={(e) => {
        e.preventDefault()
        const body: Record<string, unknown> = { name: name || null }
        if (like) body.like = like
        else if (model) Object.assign(body, { model, dim: Number(dim) || 0, provider, endpoint: endpoint || null })
        api
          .createProfile(body)
          .then(() => {
            setName('')
            setLike('')
            onCreated()
          })
          .catch(onError)
      }}
    >
      <label>
        {t('profileName')} <input id="profile-name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      </label>{' '}
      <label>
        {t('copyFunctionsOf')}{' '}
        <Choice options={['', ...profiles]} value={like} onChange={setLike} label={(v) => v || t('copyFunctionsNone')} id="profile-like" />
      </label>{' '}
      {text('profile-model', 'embeddingModel', model, setModel)}{' '}
      {text('profile-dim', 'vectorDim', dim, setDim)} {text('profile-provider', 'provider', provider, setProvider)}{' '}
      {text('profile-endpoint', 'endpoint', endpoint, setEndpoint)}
      <button type="submit">{t('newProfile')}</button>
      <span class="muted small">{t(like ? 'copyFunctionsHelp' : 'newProfileHelp')}</span>
    </form>
  )
}

function IndexTab({ atRebuilds = false }: { atRebuilds?: boolean }) {
  const status = useQuery('admin:milvus:status', api.milvusStatus)
  const profiles = useQuery('admin:milvus:profiles', api.milvusProfiles)
  const jobs = useQuery('admin:milvus:jobs', api.rebuildJobs)
  // everything above the rebuilds (status, profiles) as well: a long profiles table arriving after
  // the scroll would push them out of view again
  const loaded = !!jobs.data && !!profiles.data && !!status.data
  useEffect(() => {
    // opened as /admin/milvus/rebuild-jobs: at the rebuilds, once they are on the page
    if (atRebuilds && loaded) document.getElementById('rebuild-jobs')?.scrollIntoView()
  }, [atRebuilds, loaded])
  const hist = useQuery('admin:milvus:history', api.aliasHistory)
  const [error, setError] = useState<unknown>(null)
  const [switchAfter, setSwitchAfter] = useState(true)
  const jobList = ((jobs.data?.items ?? []) as Job[]).slice(0, 10)
  const running = jobList.some((j) => RUNNING.has(j.status))
  const refresh = () => ['admin:milvus', 'admin:audit'].forEach(invalidate)
  // poll while a rebuild runs; a reload finds it again through the jobs list
  useEffect(() => {
    if (!running) return
    const timer = setInterval(refresh, 1000)
    return () => clearInterval(timer)
  }, [running])
  const act = (p: Promise<unknown>) => p.then(refresh).catch(setError)
  const s = status.data as Json | undefined
  const docs = (s?.documents ?? {}) as Record<string, number>
  // the embedded Lite's files, from its manifest (docs/retrieval.md#flushes)
  const lite = s?.lite as { data_files: number; delta_files: number; piling_up: boolean } | null | undefined
  return (
    <section aria-labelledby="index-h">
      <h2 id="index-h">{t('indexTitle')}</h2>
      <ErrorNote error={status.error ?? profiles.error ?? error} />
      {s ? (
        <dl class="facts" aria-label={t('indexStatus')}>
          <dt>{t('milvusConnection')}</dt>
          <dd>{String(s.milvus)}</dd>
          <dt>{t('activeAlias')}</dt>
          <dd data-testid="active-alias">
            {String(s.alias)} → <span data-testid="active-collection">{String(s.collection ?? '—')}</span>
          </dd>
          <dt>{t('searchMode')}</dt>
          <dd>{String(s.search_mode ?? '—')}</dd>
          <dt>{t('chunksIndexed')}</dt>
          <dd>
            {String(s.milvus_rows ?? '—')} / {String(s.pg_chunks)} {s.in_sync == null ? t('syncUnknown') : s.in_sync ? t('inSync') : t('outOfSync')}
          </dd>
          <dt>{t('documents')}</dt>
          <dd>{Object.entries(docs).map(([k, v]) => `${k}: ${v}`).join(', ') || '—'}</dd>
          {lite ? (
            <>
              <dt>{t('liteFiles')}</dt>
              <dd data-testid="lite-files">
                {t('liteFilesValue', { data: lite.data_files, delta: lite.delta_files })}
                {lite.piling_up ? <p class="warning">{t('litePilingUp')}</p> : null}
              </dd>
            </>
          ) : null}
        </dl>
      ) : (
        <Loading />
      )}
      <h3>{t('indexProfiles')}</h3>
      <table class="grid" aria-label={t('indexProfiles')}>
        <thead>
          <tr>
            <th>{t('profileName')}</th>
            <th>{t('status')}</th>
            <th>{t('vectorDim')}</th>
            <th>{t('functions')}</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {((profiles.data?.items ?? []) as Profile[]).map((p) => (
            <tr key={p.id}>
              <td>
                {p.name} <span class="muted">{p.collection}</span>
                {p.active ? <strong> {t('activeMark')}</strong> : null}
              </td>
              <td>{t(`profileStatus_${p.status}` as MessageKey)}</td>
              <td>{p.vector_dim || '—'}</td>
              <td class="small">
                {[p.functions.embedding, p.functions.bm25, p.functions.rerank]
                  .filter(Boolean)
                  .map(
                    (f) =>
                      `${String(f!.type)} ${String(f!.name ?? '')}${f!.model ? ` (${String(f!.model)})` : ''}` +
                      (f!.lexical ? ` (${t('lexicalTransform', { name: String(f!.lexical) })})` : ''),
                  )
                  .join(' · ')}
              </td>
              <td class="row-actions">
                <button type="button" disabled={running} aria-label={t('rebuildNamed', { name: p.name })} onClick={() => act(api.startRebuild({ profile: p.name, switch: switchAfter }))}>
                  {t('rebuild')}
                </button>
                {!p.active && p.status !== 'dropped' ? (
                  <>
                    <button type="button" aria-label={t('switchNamed', { name: p.name })} onClick={() => confirm(t('switchConfirm', { name: p.name })) && act(api.switchAlias({ profile: p.name }))}>
                      {t('switchTo')}
                    </button>
                    <button type="button" aria-label={t('dropNamed', { name: p.name })} onClick={() => confirm(t('dropConfirm', { name: p.name })) && act(api.dropCollection(p.name))}>
                      {t('dropCollection')}
                    </button>
                  </>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <NewProfileForm profiles={((profiles.data?.items ?? []) as Profile[]).map((p) => p.name)} onCreated={refresh} onError={setError} />
      <div class="field check">
        <input id="switch-after" type="checkbox" checked={switchAfter} onChange={(e) => setSwitchAfter((e.target as HTMLInputElement).checked)} />
        <label for="switch-after">{t('switchWhenHealthy')}</label>
      </div>
      <h3 id="rebuild-jobs">{t('rebuildJobs')}</h3>
      <ul class="list" aria-label={t('rebuildJobs')}>
        {jobList.map((j) => (
          <li key={j.id}>
            <span class="job-status" data-status={j.status}>
              {t(`rebuildStatus_${j.status}` as MessageKey)}
            </span>{' '}
            {j.target_collection}{' '}
            {j.total_chunks ? <progress max={j.total_chunks} value={j.processed_chunks ?? 0} aria-label={t('rebuildProgress')} /> : null}{' '}
            <span class="muted">
              {j.processed_chunks ?? 0}/{j.total_chunks ?? '?'} · {when(j.started_at)}
              {j.error ? ` · ${j.error}` : ''}
            </span>
          </li>
        ))}
      </ul>
      <h3>{t('aliasHistory')}</h3>
      <button type="button" onClick={() => confirm(t('rollbackConfirm')) && act(api.switchAlias({ rollback: true }))}>
        {t('rollback')}
      </button>
      <ul class="list" aria-label={t('aliasHistory')}>
        {(((hist.data as Json | undefined)?.items ?? []) as Json[]).map((h, i) => (
          <li key={i} class="small">
            {when(h.at as string | null)} {String(h.from ?? '—')} → {String(h.to ?? '')} <span class="muted">{String(h.kind ?? '')}</span>
          </li>
        ))}
      </ul>
      <VerifyPanel />
    </section>
  )
}

const IMPORT_STATUSES = ['', 'pending', 'running', 'succeeded', 'failed'] as const

/** The tenant's import jobs with their progress (`GET /api/admin/import-jobs`: no file names,
 * operators see no content), polled while one is pending or running; server-side pages. */
function ImportsTab() {
  const [status, setStatus] = useState<(typeof IMPORT_STATUSES)[number]>('')
  const [offset, setOffset] = useState(0)
  const key = `admin:imports:${status}:${offset}`
  const jobs = useQuery(key, () => api.adminImportJobs({ status, limit: PAGE, offset }))
  const live = (jobs.data?.items ?? []).some((j) => j.status === 'pending' || j.status === 'running')
  useEffect(() => {
    if (!live) return
    const timer = setInterval(() => invalidate('admin:imports'), 1000)
    return () => clearInterval(timer)
  }, [live])
  return (
    <section aria-labelledby="imports-h">
      <h2 id="imports-h">{t('adminTab_imports')}</h2>
      <p class="muted">{t('importsHelp')}</p>
      <label>
        {t('status')}{' '}
        <Choice
          options={IMPORT_STATUSES}
          value={status}
          onChange={(v) => {
            setOffset(0)
            setStatus(v)
          }}
          label={(v) => (v ? t(`importStatus_${v}` as MessageKey) : t('all'))}
        />
      </label>
      <ErrorNote error={jobs.error} />
      <table class="grid" aria-labelledby="imports-h">
        <thead>
          <tr>
            <th>{t('created')}</th>
            <th>{t('importsBy')}</th>
            <th>{t('status')}</th>
            <th>{t('importsProgress')}</th>
            <th>{t('importsCounts')}</th>
          </tr>
        </thead>
        <tbody>
          {jobs.data?.items.map((j) => (
            <tr key={j.id} data-status={j.status}>
              <td>{when(j.created_at)}</td>
              <td>{j.created_by_email ?? j.created_by}</td>
              <td>
                <span class="job-status" data-status={j.status}>
                  {t(`importStatus_${j.status}` as MessageKey)}
                </span>
              </td>
              <td>
                {j.progress && j.progress.total ? (
                  <>
                    <progress max={j.progress.total} value={j.progress.done ?? 0} aria-label={t('importsProgress')} />{' '}
                    <span class="muted small">
                      {j.progress.done ?? 0}/{j.progress.total} {j.progress.phase ?? ''}
                    </span>
                  </>
                ) : (
                  '—'
                )}
              </td>
              <td class="small">
                {Object.entries(j.counts)
                  .map(([k, v]) => `${k}: ${v}`)
                  .join(', ') || '—'}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {jobs.data ? <Pager offset={offset} total={jobs.data.total} limit={PAGE} onOffset={setOffset} /> : null}
    </section>
  )
}

/** Verify / repair the active collection (the worker runs `openkb index verify [--repair]`'s
 * service): polled while pending or running; a reload finds the job in the list again. */
function VerifyPanel() {
  const jobs = useQuery('admin:milvus:verify', () => api.verifyJobs())
  const [error, setError] = useState<unknown>(null)
  const last = jobs.data?.items[0]
  const live = !!last && (last.status === 'pending' || last.status === 'running')
  useEffect(() => {
    if (!live) return
    const timer = setInterval(() => invalidate('admin:milvus:verify'), 1000)
    return () => {
      clearInterval(timer)
      ;['admin:milvus:status', 'admin:audit'].forEach(invalidate)
    }
  }, [live])
  const start = (repair: boolean) =>
    api
      .startVerify({ repair })
      .then(() => invalidate('admin:milvus:verify'))
      .catch(setError)
  const r = (last?.report ?? {}) as Record<string, unknown>
  return (
    <>
      <h3 id="verify-h">{t('verifyTitle')}</h3>
      <p class="muted">{t('verifyHelp')}</p>
      <ErrorNote error={jobs.error ?? error} />
      <button type="button" disabled={live} onClick={() => start(false)}>
        {t('verifyStart')}
      </button>{' '}
      <button type="button" disabled={live} onClick={() => confirm(t('repairConfirm')) && start(true)}>
        {t('repairStart')}
      </button>
      {last ? (
        <p role="status" aria-labelledby="verify-h" data-testid="verify-status" data-status={last.status}>
          <span class="job-status" data-status={last.status}>
            {t(`verifyStatus_${last.status}` as MessageKey)}
          </span>{' '}
          {live ? (
            last.progress && last.progress.total ? (
              <>
                <progress aria-label={t('verifyTitle')} max={last.progress.total} value={last.progress.done} />{' '}
                <span data-testid="verify-progress">
                  {t(last.progress.phase === 'repair' ? 'verifyPhaseRepair' : 'verifyPhase', { done: last.progress.done, total: last.progress.total })}
                </span>
              </>
            ) : (
              <progress aria-label={t('verifyTitle')} />
            )
          ) : null}
          {last.status === 'succeeded'
            ? ` ${r.ok ? t('verifyOk') : r.repaired ? t('verifyRepaired') : t('verifyDiffers')} · ${t('verifyCounts', {
                missing: String(r.missing ?? 0),
                extra: String(r.extra ?? 0),
                stale: String(r.stale ?? 0),
              })}`
            : null}
          {last.error ? ` · ${last.error}` : null} <span class="muted">{when(last.finished_at ?? last.started_at ?? last.created_at)}</span>
        </p>
      ) : null}
    </>
  )
}

/** A secret shown once (a new or rotated Dify key): kept in component state only. */
function SecretOnce({ secret, onDone }: { secret: string; onDone: () => void }) {
  return (
    <div class="secret" role="status">
      <p>{t('keyShownOnce')}</p>
      <input readOnly aria-label={t('difyKeyValue')} value={secret} class="url" /> <CopyButton text={secret} />{' '}
      <button type="button" onClick={onDone}>
        {t('done')}
      </button>
    </div>
  )
}

const splitList = (v: string) =>
  v
    .split(/[\s,]+/)
    .map((x) => x.trim())
    .filter(Boolean)

function DifyTab() {
  const info = useQuery('admin:dify:info', api.difyInfo)
  const keys = useQuery('admin:dify:keys', api.difyKeys)
  const maps = useQuery('admin:dify:mappings', api.difyMappings)
  const [error, setError] = useState<unknown>(null)
  const [secret, setSecret] = useState<string | null>(null)
  const [name, setName] = useState('')
  const [kbs, setKbs] = useState('')
  const [topK, setTopK] = useState('10')
  const [expires, setExpires] = useState('')
  const [filter, setFilter] = useState('')
  const [kid, setKid] = useState('')
  const [kbRef, setKbRef] = useState('')
  const refresh = () => ['admin:dify', 'admin:audit'].forEach(invalidate)
  const act = (p: Promise<unknown>) => p.then(refresh).catch(setError)
  return (
    <section aria-labelledby="dify-h">
      <h2 id="dify-h">{t('difyTitle')}</h2>
      {info.data ? (
        <p>
          {t('difyEndpoint')} <input readOnly aria-label={t('difyEndpoint')} value={info.data.endpoint} class="url" />
          {info.data.warnings.map((w) => (
            <span class="muted small" key={w}>
              <br />
              {w}
            </span>
          ))}
        </p>
      ) : null}
      <ErrorNote error={keys.error ?? maps.error ?? error} />
      {secret ? <SecretOnce secret={secret} onDone={() => setSecret(null)} /> : null}
      <h3>{t('difyKeys')}</h3>
      <table class="grid" aria-label={t('difyKeys')}>
        <thead>
          <tr>
            <th>{t('tokenName')}</th>
            <th>{t('status')}</th>
            <th>{t('knowledgeBases')}</th>
            <th>{t('topKLimit')}</th>
            <th>{t('expires')}</th>
            <th>{t('lastUsed')}</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {keys.data?.items.map((k) => (
            <tr key={k.id}>
              <td>{k.name}</td>
              <td>{t(`state_${k.status}` as MessageKey)}</td>
              <td class="small">{k.knowledge_base_ids.join(' ') || '—'}</td>
              <td>{k.top_k_limit}</td>
              <td>{k.expires_at ? when(k.expires_at) : t('never')}</td>
              <td>{when(k.last_used_at)}</td>
              <td class="row-actions">
                {k.stored_status === 'active' ? (
                  <button type="button" aria-label={t('disableNamed', { name: k.name })} onClick={() => act(api.disableDifyKey(k.id))}>
                    {t('disable')}
                  </button>
                ) : null}
                {k.stored_status === 'disabled' ? (
                  <button type="button" aria-label={t('enableNamed', { name: k.name })} onClick={() => act(api.enableDifyKey(k.id))}>
                    {t('enable')}
                  </button>
                ) : null}
                {k.stored_status !== 'revoked' ? (
                  <>
                    <button type="button" aria-label={t('rotateNamed', { name: k.name })} onClick={() => confirm(t('rotateConfirm', { name: k.name })) && act(api.rotateDifyKey(k.id).then((r) => setSecret(r.key)))}>
                      {t('rotate')}
                    </button>
                    <button type="button" aria-label={t('revokeNamed', { name: k.name })} onClick={() => confirm(t('revokeDifyConfirm', { name: k.name })) && act(api.revokeDifyKey(k.id))}>
                      {t('revokeAction')}
                    </button>
                  </>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form
        class="filters"
        aria-label={t('newDifyKey')}
        onSubmit={(e) => {
          e.preventDefault()
          setError(null)
          let metadata_filter: Record<string, unknown> | null = null
          if (filter.trim()) {
            try {
              metadata_filter = JSON.parse(filter) as Record<string, unknown>
            } catch {
              setError(new Error(t('filterNotJson')))
              return
            }
          }
          act(
            api
              .createDifyKey({
                name,
                knowledge_base_ids: splitList(kbs),
                top_k_limit: Number(topK) || 10,
                expires_at: expires ? new Date(expires).toISOString() : null,
                metadata_filter,
              })
              .then((r) => {
                setSecret(r.key)
                setName('')
              }),
          )
        }}
      >
        <label>
          {t('difyKeyName')} <input value={name} required onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          {t('difyKeyKbs')} <input value={kbs} onInput={(e) => setKbs((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          {t('topKLimit')} <input type="number" min={1} value={topK} onInput={(e) => setTopK((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          {t('expires')} <input type="datetime-local" value={expires} onInput={(e) => setExpires((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          {t('difyKeyFilter')} <input value={filter} placeholder='{"tag": ["public"]}' onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit" class="primary">
          {t('newDifyKey')}
        </button>
      </form>
      <h3>{t('difyMappings')}</h3>
      <table class="grid" aria-label={t('difyMappings')}>
        <thead>
          <tr>
            <th>{t('difyKnowledgeId')}</th>
            <th>{t('knowledgeBases')}</th>
            <th>{t('status')}</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {maps.data?.items.map((m) => (
            <tr key={m.id}>
              <td>{m.knowledge_id}</td>
              <td class="small">{m.knowledge_base_id}</td>
              <td>{t(`state_${m.status}` as MessageKey)}</td>
              <td>
                <button type="button" onClick={() => act(m.status === 'active' ? api.disableDifyMapping(m.id) : api.enableDifyMapping(m.id))}>
                  {m.status === 'active' ? t('disable') : t('enable')}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form
        class="filters"
        aria-label={t('newDifyMapping')}
        onSubmit={(e) => {
          e.preventDefault()
          act(api.mapDify({ knowledge_id: kid, knowledge_base_id: kbRef }).then(() => setKid('')))
        }}
      >
        <label>
          {t('difyKnowledgeId')} <input value={kid} required onInput={(e) => setKid((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          {t('difyKbRef')} <input value={kbRef} required onInput={(e) => setKbRef((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit">{t('newDifyMapping')}</button>
      </form>
    </section>
  )
}

function McpTab() {
  const session = useSession()
  // A registered client serves every tenant: only a system_admin switches it (docs/oauth.md#administration).
  const systemAdmin = session.status === 'signed-in' && session.me.tenant_roles.some((r) => r.role === 'system_admin')
  const clients = useQuery('admin:mcp:clients', api.mcpClients)
  const grants = useQuery('admin:mcp:grants', api.mcpGrants)
  const [error, setError] = useState<unknown>(null)
  const act = (p: Promise<unknown>) => p.then(() => ['admin:mcp', 'admin:audit'].forEach(invalidate)).catch(setError)
  return (
    <section aria-labelledby="mcp-h">
      <h2 id="mcp-h">{t('mcpTitle')}</h2>
      <ErrorNote error={clients.error ?? grants.error ?? error} />
      <h3>{t('mcpClients')}</h3>
      <table class="grid" aria-label={t('mcpClients')}>
        <thead>
          <tr>
            <th>{t('client')}</th>
            <th>{t('status')}</th>
            <th>{t('mcpActiveGrants')}</th>
            <th>{t('mcpLiveTokens')}</th>
            <th>{t('lastUsed')}</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {clients.data?.items.map((c) => (
            <tr key={c.id}>
              <td>
                {c.client_name} <span class="muted small">{c.client_id}</span>
              </td>
              <td>{t(`state_${c.status}` as MessageKey)}</td>
              <td>{c.active_grants}</td>
              <td>{c.live_tokens}</td>
              <td>{when(c.last_used_at)}</td>
              <td>
                {!systemAdmin && c.registration !== 'app' ? null : c.status === 'active' ? (
                  <button type="button" aria-label={t('disableNamed', { name: c.client_name })} onClick={() => act(api.disableMcpClient(c.id))}>
                    {t('disable')}
                  </button>
                ) : (
                  <button type="button" aria-label={t('enableNamed', { name: c.client_name })} onClick={() => act(api.enableMcpClient(c.id))}>
                    {t('enable')}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <h3>{t('mcpGrants')}</h3>
      <table class="grid" aria-label={t('mcpGrants')}>
        <thead>
          <tr>
            <th>{t('member')}</th>
            <th>{t('client')}</th>
            <th>{t('scopes')}</th>
            <th>{t('lastUsed')}</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {grants.data?.items.map((g) => (
            <tr key={g.id}>
              <td>
                {g.display_name} <span class="muted">{g.email}</span>
              </td>
              <td>{g.client_name}</td>
              <td>{g.scopes.join(' ')}</td>
              <td>{when(g.last_used_at)}</td>
              <td>
                <button type="button" onClick={() => confirm(t('revokeGrantConfirm', { name: g.client_name, user: g.email })) && act(api.revokeMcpGrant(g.id))}>
                  {t('revokeAction')}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  )
}

/** Groups of the tenant and their members (`/api/admin/groups`): create, rename, delete (which
 * also removes every collaborator grant the group holds: said in the confirmation), add a
 * member by email, remove one. Every change is audited by the service. */
function GroupsTab() {
  const groups = useQuery('admin:groups', api.groups)
  const [open, setOpen] = useState<string | null>(null)
  const members = useQuery(open ? `admin:group:${open}` : null, () => api.groupMembers(open!))
  const [name, setName] = useState('')
  const [email, setEmail] = useState('')
  const [error, setError] = useState<unknown>(null)
  const refresh = () => ['admin:groups', 'admin:group', 'admin:audit'].forEach(invalidate)
  const act = (p: Promise<unknown>, after?: () => void) =>
    p
      .then(() => {
        setError(null)
        after?.()
        refresh()
      })
      .catch(setError)
  return (
    <section aria-labelledby="groups-h">
      <h2 id="groups-h">{t('groups')}</h2>
      <ErrorNote error={groups.error ?? members.error ?? error} />
      <form
        class="filters"
        aria-label={t('groupCreate')}
        onSubmit={(e) => {
          e.preventDefault()
          act(api.createGroup({ name: name.trim() }), () => setName(''))
        }}
      >
        <label>
          {t('groupName')} <input value={name} required maxLength={1000} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        </label>{' '}
        <button type="submit">{t('groupCreate')}</button>
      </form>
      {groups.data && groups.data.items.length === 0 ? <p class="muted">{t('noGroups')}</p> : null}
      <ul class="list" aria-label={t('groups')}>
        {groups.data?.items.map((g) => (
          <li key={g.id}>
            <button type="button" class="link-button" aria-expanded={open === g.id} onClick={() => setOpen(open === g.id ? null : g.id)}>
              {g.name}
            </button>{' '}
            <span class="muted small">{t('groupMemberCount', { n: g.member_count })}</span>{' '}
            <button
              type="button"
              aria-label={t('groupRenameNamed', { name: g.name })}
              onClick={() => {
                const next = prompt(t('groupRenamePrompt', { name: g.name }), g.name)
                if (next && next.trim() && next.trim() !== g.name) act(api.renameGroup(g.id, { name: next.trim() }))
              }}
            >
              {t('rename')}
            </button>{' '}
            <button
              type="button"
              aria-label={t('groupDeleteNamed', { name: g.name })}
              onClick={() => confirm(t('groupDeleteConfirm', { name: g.name })) && act(api.deleteGroup(g.id), () => setOpen(null))}
            >
              {t('delete')}
            </button>
            {open === g.id ? (
              <div class="group-members">
                <table class="grid" aria-label={t('groupMembersOf', { name: g.name })}>
                  <tbody>
                    {members.data?.items.map((m) => (
                      <tr key={m.user_id}>
                        <td>{m.display_name}</td>
                        <td class="muted">{m.email}</td>
                        <td>
                          <button type="button" aria-label={t('groupRemoveNamed', { name: m.email })} onClick={() => act(api.removeGroupMember(g.id, m.user_id))}>
                            {t('remove')}
                          </button>
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
                <form
                  class="filters"
                  aria-label={t('groupAddMember')}
                  onSubmit={(e) => {
                    e.preventDefault()
                    act(api.addGroupMember(g.id, { email: email.trim() }), () => setEmail(''))
                  }}
                >
                  <label>
                    {t('email')} <input type="email" value={email} required onInput={(e) => setEmail((e.target as HTMLInputElement).value)} />
                  </label>{' '}
                  <button type="submit">{t('groupAddMember')}</button>
                </form>
              </div>
            ) : null}
          </li>
        ))}
      </ul>
    </section>
  )
}

export function AdminPage({ route }: { route: Route }) {
  const s = useSession()
  if (s.status !== 'signed-in') return <Loading />
  if (!isAdmin(s.me))
    return (
      <PublicFrame title={t('notFound')}>
        <p>{t('notFoundPage')}</p>
        <a href={paths.home()}>{t('homeTitle')}</a>
      </PublicFrame>
    )
  const asked = route.params.tab ?? ''
  const named = ALIASES[asked] ?? asked
  const tab = (TABS as readonly string[]).includes(named) ? (named as Tab) : 'users'
  return (
    <>
      <TopBar title={t('adminConsole')}>
        <a href={paths.admin()}>{t('adminConsole')}</a>
      </TopBar>
      <main id="main" class="page">
        <h1>{t('adminConsole')}</h1>
        <nav class="tabs" aria-label={t('adminConsole')}>
          {TABS.map((x) => (
            <a key={x} href={paths.admin(x)} aria-current={x === tab ? 'page' : undefined} onClick={(e) => (e.preventDefault(), navigate(paths.admin(x)))}>
              {t(`adminTab_${x}` as MessageKey)}
            </a>
          ))}
        </nav>
        {tab === 'users' ? <UsersTab /> : null}
        {tab === 'registration' ? (
          <>
            <RegistrationTab />
            <TenantZoneSection />
          </>
        ) : null}
        {tab === 'audit' ? <AuditTab /> : null}
        {tab === 'imports' ? <ImportsTab /> : null}
        {tab === 'index' ? <IndexTab atRebuilds={asked === 'milvus/rebuild-jobs'} /> : null}
        {tab === 'dify' ? <DifyTab /> : null}
        {tab === 'mcp' ? <McpTab /> : null}
        {tab === 'groups' ? <GroupsTab /> : null}
      </main>
    </>
  )
}
