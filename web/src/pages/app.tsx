/** App pages around documents: /app, /app/workspaces/:id, /app/kb/:kbId, /app/search. */
import { useEffect, useState } from 'preact/hooks'
import { api, type S } from '../api/client'
import { ShareDialog } from '../components/panels'
import { ImportDialog } from '../components/ImportDialog'
import { Tree } from '../components/Tree'
import { Dialog, ErrorNote, ErrorPage, Field, Loading, TopBar, TreeToggle } from '../components/ui'
import { t, type MessageKey } from '../lib/i18n'
import { invalidate, useQuery } from '../lib/query'
import { navigate, paths, type Route } from '../lib/router'
import { useWorkspaceOf } from '../lib/session'
import { buildTree, type TreeNode } from '../lib/tree'

function NewWorkspaceButton() {
  const [open, setOpen] = useState(false)
  const [name, setName] = useState('')
  const [error, setError] = useState<unknown>(null)
  return (
    <>
      <button type="button" onClick={() => setOpen(true)}>
        {t('newWorkspace')}
      </button>
      {open ? (
        <Dialog title={t('newWorkspace')} onClose={() => setOpen(false)}>
          <form
            onSubmit={(e) => {
              e.preventDefault()
              api
                .createWorkspace({ name })
                .then((ws) => {
                  invalidate('workspaces')
                  navigate(paths.workspace(ws.id))
                })
                .catch(setError)
            }}
          >
            <Field label={t('workspaceName')} name="workspace-name" value={name} onInput={setName} required />
            <ErrorNote error={error} />
            <div class="actions">
              <button type="button" onClick={() => setOpen(false)}>
                {t('cancel')}
              </button>
              <button type="submit" class="primary">
                {t('create')}
              </button>
            </div>
          </form>
        </Dialog>
      ) : null}
    </>
  )
}

export function HomePage() {
  const ws = useQuery('workspaces', api.workspaces)
  const recent = useQuery('recent', () => api.recentDocuments())
  // pages and folders shared with one as a collaborator of the document itself: an invitation to
  // one document outside one's workspaces left no way back to it but the link
  const shared = useQuery('shared', () => api.sharedDocuments())
  // knowledge bases readable outside one's workspaces: shared with one as a collaborator (an
  // invitation to one knowledge base makes no workspace member) or public ones; without this
  // list the home page of someone invited to a knowledge base showed no way to it
  const kbs = useQuery('kbs:all', () => api.knowledgeBases())
  const mine = new Set((ws.data?.items ?? []).map((w) => w.id))
  const outside = ws.data && kbs.data ? kbs.data.items.filter((k) => !mine.has(k.workspace_id)) : []
  return (
    <>
      <TopBar title={t('homeTitle')} />
      <main id="main" class="page">
        <h1>{t('homeTitle')}</h1>
        <section aria-labelledby="recent-h">
          <h2 id="recent-h">{t('recentDocuments')}</h2>
          {recent.loading ? <Loading /> : null}
          <ErrorNote error={recent.error} />
          {recent.data && recent.data.items.length === 0 ? <p class="muted">{t('noRecentDocuments')}</p> : null}
          <ul class="list">
            {recent.data?.items.map((d) => (
              <li key={d.id}>
                <a href={paths.doc(d.knowledge_base_id, d.id)} title={d.title}>{d.title}</a>{' '}
                <span class="muted">{d.knowledge_base_title}</span>
              </li>
            ))}
          </ul>
        </section>
        {shared.data?.items.length ? (
          <section aria-labelledby="shared-h">
            <h2 id="shared-h">{t('sharedDocuments')}</h2>
            <ul class="list">
              {shared.data.items.map((d) => {
                const role = t(`role_${d.role}` as MessageKey)
                return (
                  <li key={d.id}>
                    <a href={paths.doc(d.knowledge_base_id, d.id)} title={d.title}>{d.title}</a>{' '}
                    <span class="muted">
                      {/* no title: a knowledge base the user cannot open (only this page was shared) */}
                      {d.knowledge_base_title ? `${d.knowledge_base_title} · ` : null}
                      {d.shared_by ? t('sharedByRole', { role, name: d.shared_by.display_name }) : role}
                    </span>
                  </li>
                )
              })}
            </ul>
          </section>
        ) : null}
        <section aria-labelledby="ws-h">
          <h2 id="ws-h">{t('myWorkspaces')}</h2>
          {ws.loading ? <Loading /> : null}
          <ErrorNote error={ws.error} />
          {ws.data && ws.data.items.length === 0 ? <p class="muted">{t('noWorkspaces')}</p> : null}
          <ul class="list">
            {ws.data?.items.map((w) => (
              <li key={w.id}>
                <a href={paths.workspace(w.id)} title={w.name}>{w.name}</a> <span class="muted">{t(`role_${w.role}` as MessageKey)}</span>
              </li>
            ))}
          </ul>
          <NewWorkspaceButton />
        </section>
        {outside.length ? (
          <section aria-labelledby="outside-h">
            <h2 id="outside-h">{t('outsideKnowledgeBases')}</h2>
            <ul class="list">
              {outside.map((k) => (
                <li key={k.id}>
                  <a href={paths.kb(k.id)} title={k.title}>{k.title}</a> {k.description ? <span class="muted">{k.description}</span> : null}
                </li>
              ))}
            </ul>
          </section>
        ) : null}
      </main>
    </>
  )
}

const VISIBILITIES: S['KnowledgeBaseIn']['visibility'][] = ['private', 'workspace', 'public']

function NewKnowledgeBaseButton({ workspaceId }: { workspaceId: string }) {
  const [open, setOpen] = useState(false)
  const [title, setTitle] = useState('')
  const [description, setDescription] = useState('')
  const [visibility, setVisibility] = useState<S['KnowledgeBaseIn']['visibility']>('workspace')
  const [error, setError] = useState<unknown>(null)
  return (
    <>
      <button type="button" onClick={() => setOpen(true)}>
        {t('newKnowledgeBase')}
      </button>
      {open ? (
        <Dialog title={t('newKnowledgeBase')} onClose={() => setOpen(false)}>
          <form
            onSubmit={(e) => {
              e.preventDefault()
              api
                .createKnowledgeBase({ workspace_id: workspaceId, title, description: description || null, visibility })
                .then((kb) => {
                  invalidate(`kbs:${workspaceId}`)
                  navigate(paths.kb(kb.id))
                })
                .catch(setError)
            }}
          >
            <Field label={t('kbTitle')} name="kb-title" value={title} onInput={setTitle} required />
            <Field label={t('kbDescription')} name="kb-description" value={description} onInput={setDescription} />
            <div class="field">
              <label for="kb-visibility">{t('visibility')}</label>
              <select id="kb-visibility" value={visibility} onChange={(e) => setVisibility((e.target as HTMLSelectElement).value as typeof visibility)}>
                {VISIBILITIES.map((v) => (
                  <option key={v} value={v}>
                    {t(`visibility_${v}` as MessageKey)}
                  </option>
                ))}
              </select>
            </div>
            <ErrorNote error={error} />
            <div class="actions">
              <button type="button" onClick={() => setOpen(false)}>
                {t('cancel')}
              </button>
              <button type="submit" class="primary">
                {t('create')}
              </button>
            </div>
          </form>
        </Dialog>
      ) : null}
    </>
  )
}

export function WorkspacePage({ route }: { route: Route }) {
  const id = route.params.workspaceId
  const ws = useQuery(`workspace:${id}`, () => api.workspace(id))
  const kbs = useQuery(`kbs:${id}`, () => api.knowledgeBases(id))
  return (
    <>
      <TopBar title={ws.data?.name}>{ws.data ? <span>{ws.data.name}</span> : null}</TopBar>
      <main id="main" class="page">
        <ErrorNote error={ws.error} />
        <h1>{ws.data?.name ?? ''}</h1>
        <h2>{t('knowledgeBases')}</h2>
        {kbs.loading ? <Loading /> : null}
        <ErrorNote error={kbs.error} />
        {kbs.data && kbs.data.items.length === 0 ? <p class="muted">{t('noKnowledgeBases')}</p> : null}
        <ul class="list">
          {kbs.data?.items.map((kb) => (
            <li key={kb.id}>
              <a href={paths.kb(kb.id)} title={kb.title}>{kb.title}</a> <span class="muted">{t(`visibility_${kb.visibility}` as MessageKey)}</span>
              {kb.description ? <p class="muted">{kb.description}</p> : null}
            </li>
          ))}
        </ul>
        <div class="page-actions">
          {ws.data && ws.data.role !== 'guest' ? <NewKnowledgeBaseButton workspaceId={id} /> : null}
          {ws.data && (ws.data.role === 'owner' || ws.data.role === 'admin') ? <a href={paths.workspaceSettings(id)}>{t('settings')}</a> : null}
        </div>
      </main>
    </>
  )
}

export function KnowledgeBasePage({ route }: { route: Route }) {
  const kbId = route.params.kbId
  const kb = useQuery(`kb:${kbId}`, () => api.knowledgeBase(kbId))
  const ws = useWorkspaceOf(kb.data)
  const [sharing, setSharing] = useState(false)
  const [importing, setImporting] = useState(false)
  const [treeOpen, setTreeOpen] = useState(false)
  const caps = kb.data?.capabilities ?? []
  // unknown or not readable (404 either way): no tree and no "Export all" of what is not there
  if (kb.error) return <ErrorPage error={kb.error} back={{ href: paths.home(), label: t('homeTitle') }} />
  return (
    <>
      <TopBar title={kb.data?.title}>
        {ws.data ? <a href={paths.workspace(ws.data.id)}>{ws.data.name}</a> : null}
        {kb.data ? <span>{kb.data.title}</span> : null}
      </TopBar>
      <div class="doc-layout" data-tree-open={treeOpen ? 'true' : undefined}>
        <Tree kbId={kbId} currentId={null} canCreate={!!kb.data?.capabilities?.includes('create')} />
        <main id="main" class="doc-main">
          <ErrorNote error={kb.error} />
          <div class="doc-toolbar">
            <TreeToggle open={treeOpen} onToggle={() => setTreeOpen(!treeOpen)} />
            <span class="spacer" />
            {caps.includes('create') ? (
              <button type="button" onClick={() => setImporting(true)}>
                {t('importAction')}
              </button>
            ) : null}
            {caps.includes('manage') ? <a href={paths.kbSettings(kbId)}>{t('settings')}</a> : null}
            {caps.includes('share') || caps.includes('manage') ? (
              <button type="button" onClick={() => setSharing(true)}>
                {t('share')}
              </button>
            ) : null}
          </div>
          <h1 class="doc-title">{kb.data?.title ?? ''}</h1>
          {kb.data?.description ? <p>{kb.data.description}</p> : null}
          {kb.data ? <KbRecent kbId={kbId} /> : null}
          {kb.data ? <KbContents kbId={kbId} canCreate={caps.includes('create')} onImport={() => setImporting(true)} /> : null}
        </main>
        {importing ? <ImportDialog kbId={kbId} parentId={null} onClose={() => setImporting(false)} /> : null}
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
      </div>
    </>
  )
}

/**
 * The pages of a knowledge base most recently updated, newest first: an empty search, which the
 * search service answers with the recently updated documents the caller may read
 * (docs/retrieval.md), so the list goes through the same permission check as every result.
 */
function KbRecent({ kbId }: { kbId: string }) {
  const recent = useQuery(`recent:kb:${kbId}`, () => api.search({ query: '', knowledge_base_ids: [kbId], top_k: 5 }))
  // nothing to show, or search unavailable (Milvus down answers 503): the list is left out and
  // the contents below still say what the knowledge base holds
  const items = recent.data?.results ?? []
  if (!items.length) return null
  return (
    <section class="kb-recent" aria-labelledby="kb-recent-h">
      <h2 id="kb-recent-h">{t('recentlyUpdated')}</h2>
      <ul class="list">
        {items.map((r) => (
          <li key={r.document_id}>
            <a href={paths.doc(kbId, r.document_id)} title={r.title}>{r.title}</a>{' '}
            {r.updated_at ? <span class="muted">{new Date(r.updated_at).toLocaleString()}</span> : null}
          </li>
        ))}
      </ul>
    </section>
  )
}

/** How many documents are under ``n`` (at any depth). */
function descendants(n: TreeNode): number {
  return n.children.reduce((sum, c) => sum + 1 + descendants(c), 0)
}

/**
 * A knowledge base's home: its contents as a table of contents, the top two levels of the tree
 * (from the tree the side panel loaded: no second request) with how many documents lie deeper,
 * so the home page says what the knowledge base holds, also on a phone where the panel is
 * folded away. An empty knowledge base says how to start it instead.
 */
function KbContents(props: { kbId: string; canCreate: boolean; onImport: () => void }) {
  const tree = useQuery(`tree:${props.kbId}`, () => api.tree(props.kbId))
  if (!tree.data) return null
  const nodes = buildTree(tree.data.items)
  if (!nodes.length) {
    return (
      <section class="kb-empty" aria-labelledby="kb-contents-h">
        <h2 id="kb-contents-h">{t('tree')}</h2>
        <p>{props.canCreate ? t('kbEmptyEditor') : t('emptyTree')}</p>
        {props.canCreate ? (
          <button type="button" onClick={props.onImport}>
            {t('importAction')}
          </button>
        ) : null}
      </section>
    )
  }
  const link = (n: TreeNode) => <a href={paths.doc(props.kbId, n.item.id)}>{n.item.title || t('untitled')}</a>
  return (
    <section class="kb-contents" aria-labelledby="kb-contents-h">
      <h2 id="kb-contents-h">{t('tree')}</h2>
      <ol>
        {nodes.map((n) => (
          <li key={n.item.id}>
            {link(n)}
            {n.children.length ? (
              <ol>
                {n.children.map((c) => {
                  const more = descendants(c)
                  return (
                    <li key={c.item.id}>
                      {link(c)}
                      {more ? <span class="muted"> · {t('kbContentsMore', { n: more })}</span> : null}
                    </li>
                  )
                })}
              </ol>
            ) : null}
          </li>
        ))}
      </ol>
    </section>
  )
}

type Chunk = { content: string; heading_path: string[]; highlights?: number[][] | null }

/** One matching chunk: its heading path, then its text. A chunk that opens its section starts
 * with the section's heading line; that line is shown once, as the path's last heading (with its
 * matches marked), not a second time as the start of the text. */
function Snippet({ chunk: c }: { chunk: Chunk }) {
  const spans = c.highlights ?? []
  const last = c.heading_path[c.heading_path.length - 1]
  const opens = !!last && c.content.startsWith(last + '\n')
  const n = opens ? Array.from(last).length : 0
  return (
    <p class="snippet">
      {c.heading_path.length ? (
        <span class="muted">
          {opens ? (
            <>
              {c.heading_path.slice(0, -1).map((h) => `${h} › `)}
              <Highlighted text={c.content} spans={spans} to={n} />
            </>
          ) : (
            c.heading_path.join(' › ')
          )}
          {': '}
        </span>
      ) : null}
      <Highlighted text={c.content} spans={spans} from={opens ? n + 1 : 0} />
    </p>
  )
}

/**
 * A result's text with the server's highlights marked (docs/retrieval.md#grouped-results), as
 * text nodes (no HTML from the server). The spans are `[start, end)` offsets in code points
 * (Python's), so the text is indexed as code points, not UTF-16 units. Long text is cut to a
 * window that starts a little before the first highlight.
 * Only code points ``from`` to ``to`` are shown (a chunk's heading line is shown apart).
 */
export function Highlighted(props: { text: string; spans: number[][]; max?: number; from?: number; to?: number }) {
  const { text, spans, max = 300, from = 0 } = props
  const cps = Array.from(text)
  const to = Math.min(props.to ?? cps.length, cps.length)
  const sorted = spans.filter((s) => s.length === 2 && s[1] > s[0] && s[1] > from && s[0] < to).sort((a, b) => a[0] - b[0])
  const first = sorted.length ? Math.max(from, sorted[0][0]) : from
  const start = to - from > max && first - from > max - 80 ? Math.max(from, first - 60) : from
  const end = Math.min(to, start + max)
  const parts: (string | preact.JSX.Element)[] = []
  let pos = start
  for (const [s0, e0] of sorted) {
    const a = Math.max(s0, pos)
    const b = Math.min(e0, end)
    if (b <= a) continue
    if (a > pos) parts.push(cps.slice(pos, a).join(''))
    parts.push(<mark key={a}>{cps.slice(a, b).join('')}</mark>)
    pos = b
  }
  if (pos < end) parts.push(cps.slice(pos, end).join(''))
  return (
    <>
      {start > from ? '…' : ''}
      {parts}
      {end < to ? '…' : ''}
    </>
  )
}

export function SearchPage({ route }: { route: Route }) {
  const q = route.query.get('q') ?? ''
  const kbFilter = route.query.get('kb') ?? ''
  const [text, setText] = useState(q)
  // a search started elsewhere (the top bar's box, Back/Forward) changes the address, not this
  // component: the box shows the query whose results are listed
  useEffect(() => setText(q), [q])
  const kbs = useQuery('kbs:all', () => api.knowledgeBases())
  const results = useQuery(q ? `search:${kbFilter}:${q}` : null, () =>
    api.search({ query: q, top_k: 30, knowledge_base_ids: kbFilter ? [kbFilter] : null }),
  )
  // the server groups by document (its best chunk, more matching chunks in `snippets`, best
  // document first) and marks the query's words (`highlights`): the page only renders them
  const found = results.data?.results ?? []
  const go = (query: string, kb: string) =>
    navigate(`${paths.search(query)}${kb ? `${query ? '&' : '?'}kb=${encodeURIComponent(kb)}` : ''}`)
  return (
    <>
      <TopBar title={q ? `${q} · ${t('search')}` : t('search')} />
      <main id="main" class="page">
        <h1>{t('search')}</h1>
        <form
          role="search"
          class="search-form"
          onSubmit={(e) => {
            e.preventDefault()
            go(text, kbFilter)
          }}
        >
          <input type="search" aria-label={t('searchPlaceholder')} value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />
          <label>
            <span class="sr-only">{t('searchKbFilter')}</span>
            <select aria-label={t('searchKbFilter')} value={kbFilter} onChange={(e) => go(text, (e.target as HTMLSelectElement).value)}>
              <option value="">{t('searchAllKbs')}</option>
              {kbs.data?.items.map((kb) => (
                <option key={kb.id} value={kb.id}>
                  {kb.title}
                </option>
              ))}
            </select>
          </label>
          <button type="submit" class="primary">
            {t('search')}
          </button>
        </form>
        {results.loading ? <Loading /> : null}
        <ErrorNote error={results.error} />
        {results.data?.degraded?.includes('dense') ? (
          <p class="search-degraded" role="status" data-degraded={results.data.degraded.join(' ')}>
            {t('searchDegradedDense')}
          </p>
        ) : null}
        {q && results.data && found.length === 0 ? <p>{t('searchNoResults')}</p> : null}
        <ol class="results" aria-label={t('searchResults')}>
          {found.map((doc) => (
            <li key={doc.document_id} data-ranking={doc.ranking || undefined}>
              <h2>
                <a href={paths.doc(doc.knowledge_base_id, doc.document_id)} title={doc.title}>{doc.title}</a>
              </h2>
              <p class="muted">{[doc.knowledge_base_title, doc.path].filter(Boolean).join(' / ')}</p>
              {doc.index_status === 'pending' ? (
                <p class="muted" role="note">
                  {t('searchIndexing')}
                </p>
              ) : null}
              {[doc, ...(doc.snippets ?? [])].map((c) => (
                <Snippet key={c.chunk_id} chunk={c} />
              ))}
            </li>
          ))}
        </ol>
      </main>
    </>
  )
}
