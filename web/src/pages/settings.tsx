/**
 * Settings pages (docs/web.md#settings): /app/kb/:kbId/settings for the knowledge base's
 * owners and managers, /app/workspaces/:id/settings for the workspace's owner and admins.
 *
 * Trap: a knowledge base has NO model, embedding, rerank or Milvus setting here, ever. Models
 * are the operator's (docs/retrieval.md#principles); the admin console's Milvus & index tab is
 * where they live. A browser test asserts their absence from this page.
 */
import { useEffect, useState } from 'preact/hooks'
import { api, ApiError, type S } from '../api/client'
import { ShareDialog } from '../components/panels'
import { Choice } from '../components/forms'
import { ErrorNote, Field, Loading, TopBar } from '../components/ui'
import { t, type MessageKey } from '../lib/i18n'
import { invalidate, useQuery } from '../lib/query'
import { navigate, paths, type Route } from '../lib/router'
import { useWorkspaceOf } from '../lib/session'

const VISIBILITIES = ['private', 'workspace', 'public'] as const
type Visibility = (typeof VISIBILITIES)[number]

function KbGeneral({ kb }: { kb: S['KnowledgeBaseOut'] }) {
  const [title, setTitle] = useState(kb.title)
  const [description, setDescription] = useState(kb.description ?? '')
  const [visibility, setVisibility] = useState<Visibility>(kb.visibility as Visibility)
  const [saved, setSaved] = useState(false)
  const [error, setError] = useState<unknown>(null)
  const update = (body: S['KnowledgeBaseUpdate']) =>
    api
      .updateKnowledgeBase(kb.id, body)
      .then(() => {
        setSaved(true)
        invalidate(`kb:${kb.id}`)
        invalidate(`kbs:${kb.workspace_id}`)
      })
      .catch(setError)
  return (
    <section aria-labelledby="kb-general-h">
      <h2 id="kb-general-h">{t('settingsGeneral')}</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          setError(null)
          void update({ title, description: description || null, visibility })
        }}
      >
        <Field label={t('kbTitle')} name="kb-title" value={title} onInput={(v) => (setTitle(v), setSaved(false))} required />
        <Field label={t('kbDescription')} name="kb-description" value={description} onInput={(v) => (setDescription(v), setSaved(false))} />
        <div class="field">
          <label for="kb-visibility">{t('visibility')}</label>
          <Choice
            id="kb-visibility"
            options={VISIBILITIES}
            value={visibility}
            onChange={(v) => (setSaved(false), setVisibility(v))}
            label={(v) => t(`visibility_${v}` as MessageKey)}
          />
        </div>
        <ErrorNote error={error} />
        <button type="submit" class="primary">
          {t('save')}
        </button>
        {saved ? <span role="status"> {t('saved')}</span> : null}
      </form>
      <h3>{t('kbArchive')}</h3>
      <p class="muted">{kb.status === 'archived' ? t('kbArchivedHelp') : t('kbArchiveHelp')}</p>
      <button type="button" onClick={() => void update({ status: kb.status === 'archived' ? 'active' : 'archived' })}>
        {kb.status === 'archived' ? t('kbUnarchive') : t('kbArchive')}
      </button>
    </section>
  )
}

/** Owner only: delete once empty (the server says how many pages remain, trash included). */
function KbDelete({ kb }: { kb: S['KnowledgeBaseOut'] }) {
  const [error, setError] = useState<unknown>(null)
  const [remaining, setRemaining] = useState<number | null>(null)
  return (
    <section aria-labelledby="kb-delete-h">
      <h2 id="kb-delete-h">{t('kbDelete')}</h2>
      <p class="muted">{t('kbDeleteHelp')}</p>
      <ErrorNote error={error} />
      {remaining !== null ? (
        <p class="error" role="alert">
          {t('kbNotEmpty', { docs: remaining })}
        </p>
      ) : null}
      <button
        type="button"
        class="danger"
        onClick={() => {
          const typed = prompt(t('kbDeleteConfirm', { name: kb.title }))
          if (typed === null) return
          if (typed.trim() !== kb.title) return setError(new ApiError(422, { error: 'NAME_MISMATCH', detail: t('wsDeleteMismatch') }))
          setError(null)
          setRemaining(null)
          api
            .deleteKnowledgeBase(kb.id)
            .then(() => {
              invalidate(`kbs:${kb.workspace_id}`)
              navigate(paths.workspace(kb.workspace_id))
            })
            .catch((e: unknown) => {
              if (e instanceof ApiError && e.body.reason === 'not_empty') setRemaining(Number(e.body.documents))
              else setError(e)
            })
        }}
      >
        {t('kbDelete')}
      </button>
    </section>
  )
}

function KbTrash({ kbId }: { kbId: string }) {
  const trash = useQuery(`trash:${kbId}`, () => api.trash(kbId))
  const [error, setError] = useState<unknown>(null)
  const done = () => {
    invalidate(`trash:${kbId}`)
    invalidate(`tree:${kbId}`)
  }
  return (
    <section aria-labelledby="trash-h">
      <h2 id="trash-h">{t('trash')}</h2>
      {trash.loading ? <Loading /> : null}
      <ErrorNote error={trash.error ?? error} />
      {trash.data && trash.data.items.length === 0 ? <p class="muted">{t('trashEmpty')}</p> : null}
      {trash.data && trash.data.items.length ? (
        <table class="grid" aria-labelledby="trash-h">
          <thead>
            <tr>
              <th>{t('title')}</th>
              <th>{t('deletedAt')}</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {trash.data.items.map((d) => (
              <tr key={d.id}>
                <td>{d.title}</td>
                <td>{d.deleted_at ? new Date(d.deleted_at).toLocaleString() : '—'}</td>
                <td class="row-actions">
                  <button type="button" aria-label={t('restoreNamed', { name: d.title })} onClick={() => api.restoreFromTrash(d.id).then(done).catch(setError)}>
                    {t('restore')}
                  </button>
                  <button
                    type="button"
                    aria-label={t('purgeNamed', { name: d.title })}
                    onClick={() => confirm(t('purgeConfirm', { name: d.title })) && api.purge(d.id).then(done).catch(setError)}
                  >
                    {t('purge')}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  )
}

/** Pages pending / indexed / failed, polled while some are pending; retry re-queues the failed. */
function KbIndex({ kbId }: { kbId: string }) {
  const st = useQuery(`kb-index:${kbId}`, () => api.kbIndexStatus(kbId))
  const [queued, setQueued] = useState<number | null>(null)
  const [error, setError] = useState<unknown>(null)
  const pending = st.data?.pending ?? 0
  useEffect(() => {
    if (!pending) return
    const timer = setInterval(() => invalidate(`kb-index:${kbId}`), 2000)
    return () => clearInterval(timer)
  }, [pending > 0])
  return (
    <section aria-labelledby="kb-index-h">
      <h2 id="kb-index-h">{t('kbIndexTitle')}</h2>
      <ErrorNote error={st.error ?? error} />
      {st.data ? (
        <dl class="facts" aria-labelledby="kb-index-h">
          <dt>{t('kbIndexIndexed')}</dt>
          <dd data-testid="kb-index-indexed">{st.data.indexed}</dd>
          <dt>{t('kbIndexPending')}</dt>
          <dd data-testid="kb-index-pending">{st.data.pending}</dd>
          <dt>{t('kbIndexFailed')}</dt>
          <dd data-testid="kb-index-failed">{st.data.failed}</dd>
        </dl>
      ) : (
        <Loading />
      )}
      <button
        type="button"
        disabled={!st.data?.failed}
        onClick={() =>
          api
            .kbIndexRetry(kbId)
            .then((r) => {
              setQueued(r.queued)
              invalidate(`kb-index:${kbId}`)
            })
            .catch(setError)
        }
      >
        {t('kbIndexRetry')}
      </button>
      {queued !== null ? <span role="status"> {t('kbIndexQueued', { n: queued })}</span> : null}
    </section>
  )
}

export function KbSettingsPage({ route }: { route: Route }) {
  const kbId = route.params.kbId
  const kb = useQuery(`kb:${kbId}`, () => api.knowledgeBase(kbId))
  const ws = useWorkspaceOf(kb.data)
  const [sharing, setSharing] = useState(false)
  const caps = kb.data?.capabilities ?? []
  return (
    <>
      <TopBar title={kb.data ? `${t('settings')} · ${kb.data.title}` : t('settings')}>
        {ws.data ? <a href={paths.workspace(ws.data.id)}>{ws.data.name}</a> : null}
        {kb.data ? <a href={paths.kb(kb.data.id)}>{kb.data.title}</a> : null}
        <span>{t('settings')}</span>
      </TopBar>
      <main id="main" class="page">
        <h1>{t('kbSettingsTitle')}</h1>
        <ErrorNote error={kb.error} />
        {kb.loading ? <Loading /> : null}
        {kb.data && !caps.includes('manage') ? <p>{t('settingsNotAllowed')}</p> : null}
        {kb.data && caps.includes('manage') ? (
          <>
            <KbGeneral kb={kb.data} />
            <section aria-labelledby="kb-sharing-h">
              <h2 id="kb-sharing-h">{t('settingsSharing')}</h2>
              <p class="muted">{t('settingsSharingHelp')}</p>
              <button type="button" onClick={() => setSharing(true)}>
                {t('share')}
              </button>
            </section>
            <KbIndex kbId={kbId} />
            <KbTrash kbId={kbId} />
            {caps.includes('transfer_owner') ? <KbDelete kb={kb.data} /> : null}
          </>
        ) : null}
        {sharing ? (
          <ShareDialog
            objectType="knowledge_base"
            objectId={kbId}
            canShare={caps.includes('share')}
            canManage={caps.includes('manage')}
            visibility={kb.data?.visibility as S['KnowledgeBaseUpdate']['visibility']}
            onClose={() => setSharing(false)}
          />
        ) : null}
      </main>
    </>
  )
}

const WS_ROLES = ['admin', 'member', 'guest'] as const
type WsRole = (typeof WS_ROLES)[number]
const roleLabel = (r: WsRole) => t(`role_${r}` as MessageKey)

function WsMembers({ ws }: { ws: S['WorkspaceOut'] }) {
  const members = useQuery(`ws-members:${ws.id}`, () => api.workspaceMembers(ws.id))
  const [email, setEmail] = useState('')
  const [role, setRole] = useState<WsRole>('member')
  const [error, setError] = useState<unknown>(null)
  const done = () => invalidate(`ws-members:${ws.id}`)
  return (
    <section aria-labelledby="ws-members-h">
      <h2 id="ws-members-h">{t('members')}</h2>
      <ErrorNote error={members.error ?? error} />
      <table class="grid" aria-labelledby="ws-members-h">
        <thead>
          <tr>
            <th>{t('member')}</th>
            <th>{t('role')}</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {members.data?.items.map((m) => (
            <tr key={m.id}>
              <td>
                {m.display_name ?? m.user_id}
                {m.email ? <span class="muted small"> {m.email}</span> : null}
              </td>
              <td>
                {m.role === 'owner' ? (
                  t('role_owner')
                ) : (
                  <Choice
                    ariaLabel={t('roleOf', { name: m.display_name ?? m.user_id })}
                    options={WS_ROLES}
                    value={m.role as WsRole}
                    onChange={(role) => api.updateWorkspaceMember(ws.id, m.user_id, { role }).then(done).catch(setError)}
                    label={roleLabel}
                  />
                )}
              </td>
              <td>
                {m.role === 'owner' ? null : (
                  <button type="button" onClick={() => confirm(t('removeMemberConfirm')) && api.removeWorkspaceMember(ws.id, m.user_id).then(done).catch(setError)}>
                    {t('remove')}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form
        class="filters"
        aria-label={t('addMember')}
        onSubmit={(e) => {
          e.preventDefault()
          setError(null)
          api
            .addWorkspaceMember(ws.id, { email, role })
            .then(() => {
              setEmail('')
              done()
            })
            // the workspace is there (this page loaded it): a 404 is the address, which no account uses
            .catch((e) => setError(e instanceof ApiError && e.code === 'NOT_FOUND' ? new ApiError(404, { error: 'NO_SUCH_ACCOUNT', detail: email }) : e))
        }}
      >
        <label>
          {t('email')} <input type="email" value={email} required onInput={(e) => setEmail((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          {t('role')}{' '}
          <Choice options={WS_ROLES} value={role} onChange={setRole} label={roleLabel} />
        </label>
        <button type="submit">{t('addMember')}</button>
        <span class="muted small">{t('addMemberHelp')}</span>
      </form>
    </section>
  )
}

/** Owner only: hand the workspace to a member (who becomes owner; the previous owner stays as
 * admin), or delete it once emptied (the server refuses while pages remain, trash included). */
function WsOwnership({ ws }: { ws: S['WorkspaceOut'] }) {
  const members = useQuery(`ws-members:${ws.id}`, () => api.workspaceMembers(ws.id))
  const [heir, setHeir] = useState('')
  const [error, setError] = useState<unknown>(null)
  const [notEmpty, setNotEmpty] = useState<{ kbs: number; docs: number } | null>(null)
  const others = (members.data?.items ?? []).filter((m) => m.role !== 'owner')
  const label = (m: { display_name?: string | null; email?: string | null; user_id: string }) =>
    m.email ? `${m.display_name ?? ''} <${m.email}>` : m.user_id
  return (
    <section aria-labelledby="ws-owner-h">
      <h2 id="ws-owner-h">{t('wsOwnership')}</h2>
      <ErrorNote error={error} />
      <form
        class="filters"
        aria-label={t('transferOwnership')}
        onSubmit={(e) => {
          e.preventDefault()
          const m = others.find((x) => x.user_id === heir)
          if (!m || !confirm(t('transferConfirm', { name: ws.name, who: label(m) }))) return
          setError(null)
          api
            .transferOwner('workspace', ws.id, { user_id: heir })
            .then(() => {
              invalidate(`ws-members:${ws.id}`)
              invalidate(`workspace:${ws.id}`)
              invalidate('workspaces')
            })
            .catch(setError)
        }}
      >
        <label>
          {t('newOwner')}{' '}
          <select value={heir} required onChange={(e) => setHeir((e.target as HTMLSelectElement).value)}>
            <option value="">—</option>
            {others.map((m) => (
              <option key={m.user_id} value={m.user_id}>
                {label(m)}
              </option>
            ))}
          </select>
        </label>{' '}
        <button type="submit">{t('transferOwnership')}</button>
        <span class="muted small">{t('transferHelp')}</span>
      </form>
      <h3>{t('wsDelete')}</h3>
      <p class="muted">{t('wsDeleteHelp')}</p>
      {notEmpty ? (
        <p class="error" role="alert">
          {t('wsNotEmpty', { kbs: notEmpty.kbs, docs: notEmpty.docs })}
        </p>
      ) : null}
      <button
        type="button"
        class="danger"
        onClick={() => {
          const typed = prompt(t('wsDeleteConfirm', { name: ws.name }))
          if (typed === null) return
          if (typed.trim() !== ws.name) return setError(new ApiError(422, { error: 'NAME_MISMATCH', detail: t('wsDeleteMismatch') }))
          setError(null)
          setNotEmpty(null)
          api
            .deleteWorkspace(ws.id)
            .then(() => {
              invalidate('workspaces')
              navigate(paths.home())
            })
            .catch((e: unknown) => {
              if (e instanceof ApiError && e.body.reason === 'not_empty') setNotEmpty({ kbs: Number(e.body.knowledge_bases), docs: Number(e.body.documents) })
              else setError(e)
            })
        }}
      >
        {t('wsDelete')}
      </button>
    </section>
  )
}

export function WorkspaceSettingsPage({ route }: { route: Route }) {
  const id = route.params.workspaceId
  const ws = useQuery(`workspace:${id}`, () => api.workspace(id))
  const [name, setName] = useState('')
  const [slug, setSlug] = useState('')
  const [saved, setSaved] = useState(false)
  const [error, setError] = useState<unknown>(null)
  const [sharing, setSharing] = useState(false)
  useEffect(() => {
    if (ws.data) {
      setName(ws.data.name)
      setSlug(ws.data.slug)
    }
  }, [ws.data])
  const canManage = ws.data?.role === 'owner' || ws.data?.role === 'admin'
  return (
    <>
      <TopBar title={ws.data ? `${t('settings')} · ${ws.data.name}` : t('settings')}>
        {ws.data ? <a href={paths.workspace(ws.data.id)}>{ws.data.name}</a> : null}
        <span>{t('settings')}</span>
      </TopBar>
      <main id="main" class="page">
        <h1>{t('wsSettingsTitle')}</h1>
        <ErrorNote error={ws.error} />
        {ws.data && !canManage ? <p>{t('settingsNotAllowed')}</p> : null}
        {ws.data && canManage ? (
          <>
            <section aria-labelledby="ws-general-h">
              <h2 id="ws-general-h">{t('settingsGeneral')}</h2>
              <form
                onSubmit={(e) => {
                  e.preventDefault()
                  setError(null)
                  api
                    .updateWorkspace(id, { name, slug })
                    .then(() => {
                      setSaved(true)
                      invalidate(`workspace:${id}`)
                      invalidate('workspaces')
                    })
                    .catch(setError)
                }}
              >
                <Field label={t('workspaceName')} name="ws-name" value={name} onInput={(v) => (setName(v), setSaved(false))} required />
                <Field label={t('slug')} name="ws-slug" value={slug} onInput={(v) => (setSlug(v), setSaved(false))} required />
                <ErrorNote error={error} />
                <button type="submit" class="primary">
                  {t('save')}
                </button>
                {saved ? <span role="status"> {t('saved')}</span> : null}
              </form>
            </section>
            <WsMembers ws={ws.data} />
            {ws.data.role === 'owner' ? <WsOwnership ws={ws.data} /> : null}
            <section aria-labelledby="ws-inv-h">
              <h2 id="ws-inv-h">{t('invitationLinks')}</h2>
              <button type="button" onClick={() => setSharing(true)}>
                {t('share')}
              </button>
            </section>
          </>
        ) : null}
        {sharing ? <ShareDialog objectType="workspace" objectId={id} canShare={false} canManage onClose={() => setSharing(false)} /> : null}
      </main>
    </>
  )
}
