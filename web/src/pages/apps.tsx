/**
 * /app/account/apps: the apps installed on the user's knowledge (docs/apps.md#managing-apps).
 * Each installation shows its permission strings as sentences with switches (all off at
 * install; a switch applies to the app's next call), the collections chosen for
 * `user-selected` (knowledge bases, or folders picked from the chosen knowledge base's tree), what it wrote recently (with revert), and uninstall with keep/delete.
 *
 * Trap: after a delete-uninstall the installation leaves the list, so the undo (revert of the
 * uninstall's run) is offered from page state, not from the list.
 */
import { useState } from 'preact/hooks'
import { api, ApiError, request, type S } from '../api/client'
import { Dialog, ErrorNote, Loading, TopBar } from '../components/ui'
import { lang, t } from '../lib/i18n'
import { invalidate, setQueryData, useQuery } from '../lib/query'
import { paths } from '../lib/router'
import { AppFacts } from './facts'

type Installation = S['InstallationOut']
const base = '/api/apps/v1/installations'
const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—')

const appsApi = {
  installations: () => request<S['InstallationList']>('GET', base),
  installation: (id: string) => request<Installation>('GET', `${base}/${encodeURIComponent(id)}`),
  setGrant: (id: string, body: S['GrantIn']) => request<Installation>('PUT', `${base}/${encodeURIComponent(id)}/grants`, body),
  setCollections: (id: string, body: S['SelectedListIn']) =>
    request<Installation>('PUT', `${base}/${encodeURIComponent(id)}/collections`, body),
  changes: (id: string) => request<S['InstallationChangeList']>('GET', `${base}/${encodeURIComponent(id)}/changes`),
  revertChange: (changeId: string) => request<unknown>('POST', '/api/changes/revert', { change_id: changeId }),
  uninstall: (id: string, mode: 'keep' | 'delete') =>
    request<S['UninstallOut']>('POST', `${base}/${encodeURIComponent(id)}/uninstall`, { mode }),
  revertUninstall: (id: string) => request<unknown>('POST', `${base}/${encodeURIComponent(id)}/revert-uninstall`),
  oauthClient: (id: string) => request<S['OAuthClientOut']>('GET', `${base}/${encodeURIComponent(id)}/oauth-client`),
  setOAuthClient: (id: string, body: S['OAuthClientIn']) =>
    request<S['OAuthClientOut']>('PUT', `${base}/${encodeURIComponent(id)}/oauth-client`, body),
}

/**
 * The installation's OAuth client (docs/apps.md#oauth): whether it has one, its client id and
 * redirect URIs; create it or replace its redirect URIs (the client id stays). It is a public
 * client (PKCE, no secret), so there is nothing to show only once. The list holds only the
 * caller's own installations, so only the installation's user ever sees these controls.
 */
function OAuthClient({ inst }: { inst: Installation }) {
  const client = useQuery(`apps:oauth:${inst.id}`, () =>
    appsApi.oauthClient(inst.id).catch((e: unknown) => {
      if (e instanceof ApiError && e.code === 'NOT_FOUND') return null // none yet
      throw e
    }),
  )
  const [uris, setUris] = useState<string | null>(null)
  const [error, setError] = useState<unknown>(null)
  const [saved, setSaved] = useState(false)
  const c = client.data
  const text = uris ?? (c ? c.redirect_uris.join('\n') : '')
  const fieldId = `oauth-uris-${inst.id}`
  return (
    <section aria-label={t('apps_oauth')}>
      <h3>{t('apps_oauth')}</h3>
      {client.loading ? <Loading /> : null}
      <ErrorNote error={client.error ?? error} />
      {client.data === null ? <p class="muted">{t('apps_oauthNone')}</p> : null}
      {c ? (
        <dl class="oauth-client">
          <dt>{t('apps_oauthClientId')}</dt>
          <dd>
            <code>{c.client_id}</code>
          </dd>
          <dt>{t('apps_oauthScope')}</dt>
          <dd>
            <code>{c.scope}</code> · <code>{c.resource}</code>
          </dd>
        </dl>
      ) : null}
      {client.data !== undefined ? (
        <form
          onSubmit={(e) => {
            e.preventDefault()
            setError(null)
            setSaved(false)
            const list = text.split('\n').map((u) => u.trim()).filter(Boolean)
            appsApi
              .setOAuthClient(inst.id, { redirect_uris: list })
              .then((out) => {
                setQueryData(`apps:oauth:${inst.id}`, out)
                setUris(null)
                setSaved(true)
              })
              .catch(setError)
          }}
        >
          <label for={fieldId}>{t('apps_oauthRedirects')}</label>
          <textarea id={fieldId} rows={3} required value={text} onInput={(e) => (setUris((e.target as HTMLTextAreaElement).value), setSaved(false))} />
          <button type="submit">{c ? t('apps_oauthReplace') : t('apps_oauthCreate')}</button>
          {saved ? <span role="status"> {t('saved')}</span> : null}
        </form>
      ) : null}
    </section>
  )
}

function Grants({ inst }: { inst: Installation }) {
  const [error, setError] = useState<unknown>(null)
  const l = lang()
  return (
    <fieldset>
      <legend>{t('apps_permissions')}</legend>
      <ErrorNote error={error} />
      {inst.grants.map((g) => (
        <label key={g.permission} class="switch-row">
          <input
            type="checkbox"
            role="switch"
            checked={g.enabled}
            onChange={(e) => {
              setError(null)
              appsApi
                .setGrant(inst.id, { permission: g.permission, enabled: (e.target as HTMLInputElement).checked })
                .then(() => invalidate('apps:'))
                .catch(setError)
            }}
          />{' '}
          {g.sentences[l] ?? g.sentences.en} <code class="muted">{g.permission}</code>
        </label>
      ))}
    </fieldset>
  )
}

/** A knowledge base's live folders as `A / B` paths, in tree order (the tree holds only what the
 * user can see, so a folder offered here is one the server accepts). */
function folderPaths(items: S['TreeItem'][]): { id: string; path: string }[] {
  const kids = new Map<string | null, S['TreeItem'][]>()
  for (const i of items) {
    if (i.type !== 'folder' || i.status === 'deleted') continue
    const list = kids.get(i.parent_id) ?? []
    list.push(i)
    kids.set(i.parent_id, list)
  }
  const out: { id: string; path: string }[] = []
  const walk = (parent: string | null, prefix: string) => {
    for (const f of (kids.get(parent) ?? []).sort((x, y) => x.sort_order - y.sort_order)) {
      const path = prefix ? `${prefix} / ${f.title}` : f.title
      out.push({ id: f.id, path })
      walk(f.id, path)
    }
  }
  walk(null, '')
  return out
}

function useFolders(kbId: string | null) {
  const tree = useQuery(kbId ? `tree:${kbId}` : null, () => api.tree(kbId!))
  return { folders: tree.data ? folderPaths(tree.data.items) : null, error: tree.error }
}

function SelectedRow(props: { kbTitle: string; kbId: string; folderId: string | null | undefined; onRemove: () => void }) {
  const { folders } = useFolders(props.folderId ? props.kbId : null)
  const folder = props.folderId ? (folders?.find((f) => f.id === props.folderId)?.path ?? '…') : null
  const name = folder ? `${props.kbTitle} / ${folder}` : props.kbTitle
  return (
    <li>
      {name}{' '}
      <button type="button" aria-label={t('apps_removeNamed', { name })} onClick={props.onRemove}>
        {t('apps_remove')}
      </button>
    </li>
  )
}

function Collections({ inst }: { inst: Installation }) {
  const kbs = useQuery('apps:kbs', () => api.knowledgeBases())
  const [pick, setPick] = useState('')
  const [folderPick, setFolderPick] = useState('')
  const { folders, error: foldersError } = useFolders(pick || null)
  const [error, setError] = useState<unknown>(null)
  const selected = inst.selected_collections
  const title = (id: string) => kbs.data?.items.find((k) => k.id === id)?.title ?? id
  const save = (items: { knowledge_base_id: string; document_id?: string | null }[]) => {
    setError(null)
    appsApi
      .setCollections(inst.id, { collections: items })
      .then(() => invalidate('apps:'))
      .catch(setError)
  }
  return (
    <section aria-label={t('apps_selected')}>
      <h3>{t('apps_selected')}</h3>
      <p class="muted">{t('apps_selectedHelp')}</p>
      <ErrorNote error={kbs.error ?? foldersError ?? error} />
      {selected.length === 0 ? <p class="muted">{t('apps_noneSelected')}</p> : null}
      <ul>
        {selected.map((c, i) => (
          <SelectedRow
            key={`${c.knowledge_base_id}/${c.document_id ?? ''}`}
            kbTitle={title(c.knowledge_base_id)}
            kbId={c.knowledge_base_id}
            folderId={c.document_id}
            onRemove={() => save(selected.filter((_, j) => j !== i))}
          />
        ))}
      </ul>
      <label>
        {t('apps_addCollection')}{' '}
        <select
          value={pick}
          onChange={(e) => {
            setPick((e.target as HTMLSelectElement).value)
            setFolderPick('')
          }}
        >
          <option value="">—</option>
          {kbs.data?.items.map((k) => (
            <option key={k.id} value={k.id}>
              {k.title}
            </option>
          ))}
        </select>
      </label>{' '}
      {pick && folders?.length ? (
        <>
          <label>
            {t('apps_folder')}{' '}
            <select value={folderPick} onChange={(e) => setFolderPick((e.target as HTMLSelectElement).value)}>
              <option value="">{t('apps_wholeKb')}</option>
              {folders.map((f) => (
                <option key={f.id} value={f.id}>
                  {f.path}
                </option>
              ))}
            </select>
          </label>{' '}
        </>
      ) : null}
      <button
        type="button"
        disabled={!pick}
        onClick={() => {
          save([
            ...selected.map((c) => ({ knowledge_base_id: c.knowledge_base_id, document_id: c.document_id ?? null })),
            { knowledge_base_id: pick, document_id: folderPick || null },
          ])
          setPick('')
          setFolderPick('')
        }}
      >
        {t('apps_add')}
      </button>
    </section>
  )
}

function RecentChanges({ inst }: { inst: Installation }) {
  const changes = useQuery(`apps:changes:${inst.id}`, () => appsApi.changes(inst.id))
  const [error, setError] = useState<unknown>(null)
  const items = changes.data?.items ?? []
  return (
    <section aria-label={t('apps_recentChanges')}>
      <h3>{t('apps_recentChanges')}</h3>
      {changes.loading ? <Loading /> : null}
      <ErrorNote error={changes.error ?? error} />
      {changes.data && items.length === 0 ? <p class="muted">{t('apps_noChanges')}</p> : null}
      {items.length ? (
        <table class="grid">
          <thead>
            <tr>
              <th>{t('apps_when')}</th>
              <th>{t('apps_what')}</th>
              <th>{t('status')}</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {items.map((c) => (
              <tr key={c.id}>
                <td>{when(c.created_at)}</td>
                <td>{c.summary}</td>
                <td>{c.status === 'reverted' ? t('apps_reverted') : t('apps_applied')}</td>
                <td>
                  {c.status === 'applied' ? (
                    <button
                      type="button"
                      aria-label={t('apps_revertNamed', { name: c.summary })}
                      onClick={() => {
                        setError(null)
                        appsApi
                          .revertChange(c.id)
                          .then(() => invalidate('apps:'))
                          .catch(setError)
                      }}
                    >
                      {t('apps_revert')}
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  )
}

function UninstallDialog(props: { inst: Installation; onClose: () => void; onDone: (out: S['UninstallOut']) => void }) {
  const [mode, setMode] = useState<'keep' | 'delete'>('keep')
  const [error, setError] = useState<unknown>(null)
  // what it contributed as of now (the list may be older than the app's last writes)
  const fresh = useQuery(`apps:one:${props.inst.id}`, () => appsApi.installation(props.inst.id))
  const c = fresh.data?.contributions ?? props.inst.contributions
  return (
    <Dialog title={t('apps_uninstallNamed', { name: props.inst.app.name })} onClose={props.onClose}>
      <p>
        {t('apps_contributed', { documents: c.documents ?? 0, collections: c.collections ?? 0, facts: c.facts ?? 0 })}
      </p>
      <fieldset>
        <legend>{t('apps_whatToDo')}</legend>
        <label>
          <input type="radio" name="uninstall-mode" checked={mode === 'keep'} onChange={() => setMode('keep')} />{' '}
          {t('apps_keep')}
        </label>
        <label>
          <input type="radio" name="uninstall-mode" checked={mode === 'delete'} onChange={() => setMode('delete')} />{' '}
          {t('apps_deleteToo')}
        </label>
      </fieldset>
      <ErrorNote error={error} />
      <div class="actions">
        <button type="button" onClick={props.onClose}>
          {t('cancel')}
        </button>
        <button
          type="button"
          class="danger"
          onClick={() =>
            appsApi
              .uninstall(props.inst.id, mode)
              .then((out) => {
                invalidate('apps:')
                props.onDone(out)
              })
              .catch(setError)
          }
        >
          {t('apps_uninstall')}
        </button>
      </div>
    </Dialog>
  )
}

function InstallationCard(props: { inst: Installation; onUninstalled: (out: S['UninstallOut']) => void }) {
  const { inst } = props
  const [open, setOpen] = useState(false)
  const hId = `app-${inst.id}-h`
  const wantsSelected = inst.grants.some((g) => g.permission.endsWith(':user-selected'))
  return (
    <section class="card" aria-labelledby={hId}>
      <h2 id={hId}>{inst.app.name}</h2>
      {inst.app.description ? <p>{inst.app.description}</p> : null}
      {inst.app.reason ? <p class="muted">{inst.app.reason}</p> : null}
      <p class="muted">{t('apps_installedAt', { when: when(inst.created_at) })}</p>
      <Grants inst={inst} />
      {wantsSelected ? <Collections inst={inst} /> : null}
      <AppFacts installationId={inst.id} />
      <OAuthClient inst={inst} />
      <RecentChanges inst={inst} />
      <button
        type="button"
        class="danger"
        onClick={() => {
          invalidate(`apps:one:${inst.id}`) // counted afresh each time the dialog opens
          setOpen(true)
        }}
      >
        {t('apps_uninstall')}
      </button>
      {open ? <UninstallDialog inst={inst} onClose={() => setOpen(false)} onDone={props.onUninstalled} /> : null}
    </section>
  )
}

export function AppsPage() {
  const list = useQuery('apps:installations', appsApi.installations)
  const [done, setDone] = useState<{ id: string; name: string; out: S['UninstallOut'] } | null>(null)
  const [error, setError] = useState<unknown>(null)
  const items = list.data?.items ?? []
  return (
    <>
      <TopBar title={t('apps_title')}>
        <a href={paths.account()}>{t('myAccount')}</a>
        <span>{t('apps_title')}</span>
      </TopBar>
      <main id="main" class="page">
        <h1>{t('apps_title')}</h1>
        <p class="muted">{t('apps_help')}</p>
        {list.loading ? <Loading /> : null}
        <ErrorNote error={list.error ?? error} />
        {done ? (
          <p role="status">
            {t('apps_uninstalled', { name: done.name })}{' '}
            {done.out.run_id ? (
              <button
                type="button"
                onClick={() => {
                  setError(null)
                  appsApi
                    .revertUninstall(done.id)
                    .then(() => setDone(null))
                    .catch(setError)
                }}
              >
                {t('apps_undoDelete')}
              </button>
            ) : null}
          </p>
        ) : null}
        {list.data && items.length === 0 ? <p class="muted">{t('apps_none')}</p> : null}
        {items.map((inst) => (
          <InstallationCard
            key={inst.id}
            inst={inst}
            onUninstalled={(out) => setDone({ id: inst.id, name: inst.app.name, out })}
          />
        ))}
      </main>
    </>
  )
}
