/**
 * The document page (docs/04 §4, docs/14 §3): top bar with breadcrumb and actions, left tree,
 * title + editor (read / edit / source), right outline.
 *
 * Autosave: every change marks the page dirty; after a quiet moment (DEBOUNCE_MS) the body and
 * title are saved as a new version with `base_version_id` = the version the edit started from
 * (docs/api.md: optimistic locking). States shown: unsaved, saving, saved, failed (with retry).
 * A 409 VERSION_CONFLICT opens the conflict dialog with both texts: keep mine (saved on top of
 * the current version) or take theirs (the editor reloads it).
 *
 * Traps: a save can be in flight while the user keeps typing; the next save starts only when
 * it returns, from the version it created. Leaving with unsaved work asks first (in-app
 * navigation through the router guard, reload/close through `beforeunload`).
 */
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks'
import { api, ApiError, sha256Hex, type S } from '../api/client'
import { exportLabel, exportZip } from '../components/ExportDownload'
import { handleLinkClick, resolveStoredUrl, type LinkTargets } from '../components/MarkdownView'
import { Outline } from '../components/Outline'
import { Changes } from '../components/Changes'
import { HistoryDialog, ShareDialog } from '../components/panels'
import { CopyDialog, DeleteQuestion, duplicatePage, Tree } from '../components/Tree'
import { Dialog, ErrorNote, ErrorPage, Loading, TopBar, TreeToggle } from '../components/ui'
import type { EditorHandle } from '../editor/Editor'
import { t } from '../lib/i18n'
import { invalidate, prefetch, settled, useQuery } from '../lib/query'
import { navigate, paths, setLeaveGuard, type Route } from '../lib/router'
import { useWorkspaceOf } from '../lib/session'
import { headings } from '../lib/tree'

const DEBOUNCE_MS = 800
// index status polling while a save is not searchable yet: first look after 1 s, then 1.5x
// longer each time up to 5 s (an index job takes a second or two on an idle appliance)
const INDEX_POLL_FIRST_MS = 1000
const INDEX_POLL_MAX_MS = 5000

interface IndexState {
  status: string // pending | indexed | failed
  error?: string | null
}

/**
 * The page's own index status (docs/web.md#the-document-page): whether its latest save is
 * searchable. While it is pending, GET the document now and then until it is indexed or failed.
 * Never while the tab is hidden (a background tab must not keep the server busy); looking at
 * the tab again resumes from the short delay. `saved` restarts the watch after a save.
 * Trap: a look can still be in flight when the tab hides or a save restarts the watch; its
 * answer is dropped (`stopped`), so an old "indexed" never overwrites the new save's "pending".
 */
function useIndexStatus(docId: string, initial: IndexState) {
  const [idx, setIdx] = useState<IndexState>(initial)
  const [round, setRound] = useState(0)
  useEffect(() => {
    if (idx.status !== 'pending') return
    let stopped = false
    let delay = INDEX_POLL_FIRST_MS
    let timer: number | undefined
    let looking = false
    const look = async () => {
      timer = undefined
      if (stopped || document.visibilityState === 'hidden') return // resumed by onVisible
      looking = true
      try {
        const d = await api.document(docId)
        if (stopped) return
        if (d.index_status !== 'pending') {
          setIdx({ status: d.index_status, error: d.index_error })
          return
        }
      } catch {
        // a failed look is not a failed index: keep watching
      } finally {
        looking = false
      }
      if (stopped) return
      delay = Math.min(delay * 1.5, INDEX_POLL_MAX_MS)
      timer = window.setTimeout(() => void look(), delay)
    }
    const onVisible = () => {
      if (document.visibilityState !== 'visible' || stopped || looking || timer !== undefined) return
      delay = INDEX_POLL_FIRST_MS
      timer = window.setTimeout(() => void look(), 0)
    }
    timer = window.setTimeout(() => void look(), delay)
    document.addEventListener('visibilitychange', onVisible)
    return () => {
      stopped = true
      window.clearTimeout(timer)
      document.removeEventListener('visibilitychange', onVisible)
    }
  }, [docId, idx.status, round])
  const set = (next: IndexState) => {
    setIdx(next)
    setRound((r) => r + 1)
  }
  return [idx, set] as const
}

function IndexBadge({ idx }: { idx: IndexState }) {
  const label = idx.status === 'pending' ? t('indexPending') : idx.status === 'failed' ? t('indexFailed') : t('indexIndexed')
  const hint = idx.status === 'pending' ? t('indexPendingHint') : idx.status === 'failed' ? idx.error || undefined : undefined
  return (
    <span class={`index-state ${idx.status}`} aria-live="polite" data-index-status={idx.status} title={hint}>
      {label}
    </span>
  )
}

type SaveState = 'saved' | 'dirty' | 'saving' | 'failed' | 'conflict'
type Mode = 'read' | 'edit' | 'source'

interface Base {
  versionId: string | null
  markdown: string
  title: string
}

type EditorModule = typeof import('../editor/Editor')
let editorModule: EditorModule | undefined
let editorLoading: Promise<EditorModule> | undefined

/**
 * The editor chunk, imported once per page load and kept: once it is there the page mounts the
 * editor in the same task as its render. Every `import()` call resolves in a later task, behind
 * whatever the page queued meanwhile (its renders, frames, the other answers), and that wait
 * was on the way to the editor (bench/web.py: editor ready). A failed import is tried again on
 * the next call.
 */
function loadEditor(): Promise<EditorModule> {
  editorLoading ??= import('../editor/Editor').then(
    (m) => (editorModule = m),
    (e: unknown) => {
      editorLoading = undefined
      throw e
    },
  )
  return editorLoading
}

/**
 * The title while editing: one line of text that wraps and grows with what it holds, so a long
 * title stays readable instead of scrolling out of a one-line box. A title is one line
 * (docs/api.md#body-limits): Enter goes on into the body, and pasted line breaks become spaces.
 */
function TitleInput(props: { value: string; onChange: (v: string) => void; onEnter: () => void }) {
  const el = useRef<HTMLTextAreaElement>(null)
  useLayoutEffect(() => {
    const ta = el.current
    if (!ta) return
    ta.style.height = 'auto'
    ta.style.height = `${ta.scrollHeight}px`
  }, [props.value])
  return (
    <textarea
      ref={el}
      class="doc-title-input"
      aria-label={t('title')}
      rows={1}
      value={props.value}
      onKeyDown={(e) => {
        if (e.key === 'Enter' && !e.isComposing) {
          e.preventDefault()
          props.onEnter()
        }
      }}
      onInput={(e) => {
        const ta = e.target as HTMLTextAreaElement
        const v = ta.value.replace(/\s*[\r\n]+\s*/g, ' ')
        if (v !== ta.value) ta.value = v
        props.onChange(v)
      }}
    />
  )
}

/**
 * The original of an index-only document (`metadata.indexOnly` and `metadata.sourceUri`, set by
 * OpenKB when an app sends `text` + `sourceUri`), or null for an ordinary page. `href` only for
 * an http(s) URL: anything else is shown as text, never made a link (no `javascript:`).
 */
export function indexOnlySource(doc: S['DocumentOut']): { text: string; href: string | null } | null {
  const meta = doc.metadata as Record<string, unknown> | undefined
  if (meta?.indexOnly !== true || typeof meta.sourceUri !== 'string') return null
  const text = meta.sourceUri
  try {
    const url = new URL(text)
    return { text, href: url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null }
  } catch {
    return { text, href: null }
  }
}

/**
 * What the document page reads first, started by the entry script before the app renders
 * (main.tsx): the document (the server's preload hint has usually sent it already,
 * server/web/__init__.py) and the editor chunk; its knowledge base once the document has
 * answered. Same keys and requests as DocumentPage's own queries, which then take these
 * answers. Returns when the document's read has settled (main.tsx loads the session then).
 *
 * Why one after the other: the appliance answers concurrent reads about together, so the
 * document, the knowledge base and the session started at once all came as late as the three
 * together, and the editor waited for the breadcrumb's and the avatar's reads
 * (bench/web.py: editor ready). The document comes first; the rest follows a few ms later.
 */
export function prefetchDocumentPage(route: Route): Promise<void> {
  const { kbId, docId } = route.params
  void loadEditor()
  prefetch(`doc:${docId}`, () => api.document(docId))
  const first = settled(`doc:${docId}`)
  prefetch(`kb:${kbId}`, () => first.then(() => api.knowledgeBase(kbId)))
  return first
}

export function DocumentPage({ route }: { route: Route }) {
  const { kbId, docId } = route.params
  void loadEditor() // the biggest download: with the document request, not after it
  const doc = useQuery(`doc:${docId}`, () => api.document(docId))
  const kb = useQuery(`kb:${kbId}`, () => api.knowledgeBase(kbId))
  const ws = useWorkspaceOf(kb.data)
  if (doc.error) {
    const back = kb.data ? { href: paths.kb(kbId), label: kb.data.title } : { href: paths.home(), label: t('homeTitle') }
    return <ErrorPage error={doc.error} back={back} />
  }
  if (!doc.data) {
    return (
      <>
        <TopBar />
        <main id="main" class="page">
          <Loading />
        </main>
      </>
    )
  }
  return <DocumentEditor key={docId} doc={doc.data} kb={kb.data} ws={ws.data} />
}

function DocumentEditor(props: { doc: S['DocumentOut']; kb?: S['KnowledgeBaseOut']; ws?: S['WorkspaceOut'] }) {
  const { doc } = props
  const kbId = doc.knowledge_base_id
  // an app's index of a text kept elsewhere (docs/apps.md#api): read-only here, whatever the
  // caller may do, since an edit would no longer be that text
  const original = indexOnlySource(doc)
  const canEdit = doc.type === 'page' && !!doc.capabilities?.includes('edit') && original === null
  const [mode, setMode] = useState<Mode>(canEdit ? 'edit' : 'read')
  const [treeOpen, setTreeOpen] = useState(false) // narrow screens only (TreeToggle); closed on each document (keyed)
  const [state, setState] = useState<SaveState>('saved')
  const [dupError, setDupError] = useState<unknown>(null)
  const [saveError, setSaveError] = useState<unknown>(null)
  const [title, setTitle] = useState(doc.title)
  const [markdown, setMarkdown] = useState(doc.markdown ?? '')
  const [editorKey, setEditorKey] = useState(0)
  const [conflict, setConflict] = useState<S['DocumentOut'] | null>(null)
  const [source, setSource] = useState('')
  const [sourceError, setSourceError] = useState<ApiError | null>(null)
  const [panel, setPanel] = useState<'history' | 'share' | 'delete' | 'copy' | null>(null)
  const [moreOpen, setMoreOpen] = useState(false)
  const [saves, setSaves] = useState(0) // successful saves on this page (data-saves: tests and scripts wait on it)
  // The tree and the outline render once the editor is up (or failed, or there is none): they
  // would otherwise take the main thread while the editor mounts (bench/web.py: editor ready).
  // The tree's request starts at once, so its answer is usually there by then.
  const [sides, setSides] = useState(doc.type !== 'page')
  const [idx, setIdx] = useIndexStatus(doc.id, { status: doc.index_status, error: doc.index_error })

  const base = useRef<Base>({ versionId: doc.current_version_id, markdown: doc.markdown ?? '', title: doc.title })
  const latest = useRef({ markdown: doc.markdown ?? '', title: doc.title })
  const timer = useRef<number | undefined>(undefined)
  const inFlight = useRef(false)
  const stateRef = useRef<SaveState>('saved')
  // the source textarea's text while in source mode (null otherwise): unsaved until *Save*
  const sourceText = useRef<string | null>(null)
  const editorEl = useRef<HTMLDivElement>(null)
  const scroller = useRef<HTMLElement>(null)
  const handle = useRef<EditorHandle | null>(null)

  useEffect(() => prefetch(`tree:${kbId}`, () => api.tree(kbId)), [kbId])

  const setSave = (s: SaveState) => {
    stateRef.current = s
    setState(s)
  }

  const targets: LinkTargets = {
    documentUrl: (id) => `/app/kb/${kbId}/docs/${id}`,
    assetUrl: (id) => `/api/assets/${id}`,
    navigate,
  }

  async function saveNow(force?: { baseVersionId: string | null }) {
    window.clearTimeout(timer.current)
    if (inFlight.current) return
    const md = latest.current.markdown
    const ti = latest.current.title.trim() || t('untitled')
    if (!force && md === base.current.markdown && ti === base.current.title) {
      setSave('saved')
      return
    }
    inFlight.current = true
    setSave('saving')
    setSaveError(null)
    try {
      const res = await api.saveVersion(doc.id, {
        base_version_id: force ? force.baseVersionId : base.current.versionId,
        title: ti,
        markdown: md,
        markdown_hash: await sha256Hex(md),
      })
      base.current = { versionId: res.version_id, markdown: md, title: ti }
      inFlight.current = false
      setSaves((n) => n + 1)
      setIdx({ status: res.index_status })
      invalidate(`tree:${kbId}`)
      invalidate('recent') // the home page's and the knowledge base's recent lists (dropped while not shown)
      if (latest.current.markdown !== md || (latest.current.title.trim() || t('untitled')) !== ti) {
        setSave('dirty')
        schedule()
      } else {
        setSave('saved')
      }
    } catch (e) {
      inFlight.current = false
      if (e instanceof ApiError && e.code === 'VERSION_CONFLICT') {
        setSave('conflict')
        try {
          setConflict(await api.document(doc.id))
        } catch (e2) {
          setSaveError(e2)
          setSave('failed')
        }
      } else {
        setSaveError(e)
        setSave('failed')
      }
    }
  }

  function schedule() {
    window.clearTimeout(timer.current)
    timer.current = window.setTimeout(() => void saveNow(), DEBOUNCE_MS)
  }

  function changed(next: { markdown?: string; title?: string }) {
    if (!canEdit) return // a read-only editor: whatever it reports is not the reader's to save
    latest.current = { ...latest.current, ...next }
    if (next.markdown !== undefined) setMarkdown(next.markdown)
    if (stateRef.current === 'conflict') return // the dialog decides
    if (
      !inFlight.current &&
      latest.current.markdown === base.current.markdown &&
      (latest.current.title.trim() || t('untitled')) === base.current.title
    ) {
      // back to what is saved (an edit undone): nothing to save, nothing to warn about on leaving
      window.clearTimeout(timer.current)
      setSaveError(null)
      setSave('saved')
      return
    }
    setSave('dirty')
    schedule()
  }

  // mount the editor (again when the text is replaced: take theirs, restore, source save).
  // A layout effect: the mount starts right after this render is committed, not a frame later.
  useLayoutEffect(() => {
    if (mode === 'source' || doc.type !== 'page') {
      setSides(true)
      return
    }
    let cancelled = false
    const el = editorEl.current!
    const mount = async ({ mountEditor }: EditorModule) => {
      if (cancelled) return
      const h = await mountEditor(el, {
        markdown: latest.current.markdown,
        readonly: mode === 'read',
        placeholder: t('editorPlaceholder'),
        onChange: (md) => changed({ markdown: md }),
        onUpload: async (file) => {
          const form = new FormData()
          form.append('file', file)
          form.append('document_id', doc.id)
          const a = await api.upload(form)
          return `asset://${a.id}`
        },
        resolveUrl: (u) => resolveStoredUrl(u, targets),
      })
      if (cancelled) {
        void h.destroy()
        return
      }
      handle.current = h
      // the editor's own serialization of what it loaded is the baseline (it may differ from
      // the stored text in spacing); unless edits are pending, nothing is unsaved
      if (latest.current.markdown === base.current.markdown) {
        base.current = { ...base.current, markdown: h.loaded }
        latest.current = { ...latest.current, markdown: h.loaded }
      }
      el.setAttribute('data-ready', 'true')
    }
    // the chunk is usually there already (the document page's HTML runs it): mount now
    void (editorModule ? mount(editorModule) : loadEditor().then(mount)).finally(() => {
      if (!cancelled) setSides(true)
    })
    return () => {
      cancelled = true
      el.removeAttribute('data-ready')
      void handle.current?.destroy()
      handle.current = null
    }
  }, [editorKey, mode === 'source'])

  useEffect(() => {
    handle.current?.setReadonly(mode === 'read')
  }, [mode])

  // links inside the editor: internal ones open in the app, others in a new tab (read mode)
  useEffect(() => {
    const el = editorEl.current
    if (!el) return
    const onClick = (e: MouseEvent) => {
      if (mode === 'read' || (e.target as Element).closest('a')?.getAttribute('href')?.startsWith('openkb://')) handleLinkClick(e, targets)
    }
    el.addEventListener('click', onClick)
    return () => el.removeEventListener('click', onClick)
  }, [mode])

  // Ctrl+S / Cmd+S saves now (in source mode: Save source) instead of the browser's "Save page
  // as"; for a reader it stays the browser's. A ref: the listener is added once, the handler
  // must see this render's mode and source text.
  const saveKey = useRef<() => void>(() => {})
  saveKey.current = () => {
    if (mode === 'source') {
      void saveSource()
      return
    }
    const now = handle.current?.getMarkdown()
    if (now !== undefined && now !== latest.current.markdown) changed({ markdown: now })
    if (stateRef.current === 'dirty' || stateRef.current === 'failed') void saveNow()
  }
  useEffect(() => {
    if (!canEdit) return
    const onKey = (e: KeyboardEvent) => {
      if (!(e.ctrlKey || e.metaKey) || e.altKey || e.shiftKey || e.key.toLowerCase() !== 's') return
      e.preventDefault()
      saveKey.current()
    }
    window.addEventListener('keydown', onKey)
    return () => window.removeEventListener('keydown', onKey)
  }, [])

  // never leave unsaved work silently
  useEffect(() => {
    const unsafe = () => {
      if (sourceText.current !== null && sourceText.current !== latest.current.markdown) return true
      // the editor reports changes after a short debounce: ask it directly too
      const now = handle.current?.getMarkdown()
      if (now !== undefined && now !== latest.current.markdown) changed({ markdown: now })
      return stateRef.current !== 'saved'
    }
    setLeaveGuard(() => !unsafe() || window.confirm(t('unsavedLeave')))
    const onBeforeUnload = (e: BeforeUnloadEvent) => {
      if (unsafe()) {
        e.preventDefault()
        e.returnValue = ''
      }
    }
    window.addEventListener('beforeunload', onBeforeUnload)
    return () => {
      setLeaveGuard(null)
      window.removeEventListener('beforeunload', onBeforeUnload)
      window.clearTimeout(timer.current)
    }
  }, [])

  function replaceText(md: string, versionId: string | null, newTitle: string) {
    base.current = { versionId, markdown: md, title: newTitle }
    latest.current = { markdown: md, title: newTitle }
    setMarkdown(md)
    if (sourceText.current !== null) {
      // in source mode: the textarea shows the new text too
      sourceText.current = md
      setSource(md)
    }
    setTitle(newTitle)
    setEditorKey((k) => k + 1)
    setSave('saved')
  }

  // Restoring a version replaces the text. What was typed since the last save (within the
  // autosave pause) is saved first, so the history keeps it under the restored version; unsaved
  // source text, or a save that fails or conflicts, is asked about (docs/web.md#version-history).
  async function settleBeforeRestore(): Promise<boolean> {
    if (sourceText.current !== null && sourceText.current !== latest.current.markdown) return window.confirm(t('restoreDropsUnsaved'))
    const now = handle.current?.getMarkdown()
    if (now !== undefined && now !== latest.current.markdown) changed({ markdown: now })
    for (let i = 0; i < 200 && inFlight.current; i++) await new Promise((r) => window.setTimeout(r, 50))
    if (stateRef.current === 'dirty' || stateRef.current === 'failed') await saveNow()
    return stateRef.current === 'saved' || window.confirm(t('restoreDropsUnsaved'))
  }

  // Leaving source mode without saving drops its text (the editor shows what is saved): ask first.
  function switchMode(next: Mode) {
    if (sourceText.current !== null && sourceText.current !== latest.current.markdown && !window.confirm(t('sourceDiscard'))) return
    sourceText.current = null
    setSourceError(null)
    setMode(next)
  }

  async function saveSource() {
    setSourceError(null)
    // the text a conflict's "keep mine" saves; a refused text is not the page's (leaving source
    // mode then still asks about it)
    const before = latest.current.markdown
    latest.current = { ...latest.current, markdown: source }
    try {
      const res = await api.saveVersion(doc.id, {
        base_version_id: base.current.versionId,
        title: latest.current.title.trim() || t('untitled'),
        markdown: source,
        markdown_hash: await sha256Hex(source),
      })
      // the server stores the normalized form: show what was stored
      const fresh = await api.document(doc.id)
      invalidate('recent')
      replaceText(fresh.markdown ?? '', res.version_id, fresh.title)
      setIdx({ status: fresh.index_status, error: fresh.index_error })
      sourceText.current = null
      setMode('edit')
    } catch (e) {
      if (e instanceof ApiError && e.code === 'VERSION_CONFLICT') {
        setSave('conflict')
        setConflict(await api.document(doc.id))
      } else {
        latest.current = { ...latest.current, markdown: before }
        setSourceError(e instanceof ApiError ? e : new ApiError(0, { error: 'NETWORK', detail: String(e) }))
      }
    }
  }

  // a copy of the saved page (the menu item waits for "Saved"), right after it; then it opens
  async function duplicate() {
    setDupError(null)
    await duplicatePage(kbId, doc.id).catch(setDupError)
  }

  function exportMarkdown() {
    const blob = new Blob([latest.current.markdown], { type: 'text/markdown;charset=utf-8' })
    const a = document.createElement('a')
    a.href = URL.createObjectURL(blob)
    a.download = `${(latest.current.title || 'document').replace(/[\\/:*?"<>|]+/g, '_')}.md`
    a.click()
    setTimeout(() => URL.revokeObjectURL(a.href), 1000)
  }

  const statusText =
    state === 'saving' ? t('saveSaving') : state === 'saved' ? t('saveSaved') : state === 'failed' ? t('saveFailed') : t('saveDirty')
  const hs = headings(markdown)

  return (
    <>
      <TopBar title={title.trim() || t('untitled')}>
        {props.ws ? <a href={paths.workspace(props.ws.id)}>{props.ws.name}</a> : null}
        {props.kb ? <a href={paths.kb(kbId)}>{props.kb.title}</a> : null}
        {(doc.path ?? []).filter((p) => p.id !== doc.id).map((p) => (
          <span key={p.id}>{p.title}</span>
        ))}
        <span aria-current="page">{title}</span>
      </TopBar>
      <div class="doc-layout" data-tree-open={treeOpen ? 'true' : undefined}>
        {sides ? (
          <Tree kbId={kbId} currentId={doc.id} canCreate={!!props.kb?.capabilities?.includes('create') || canEdit} currentTitle={title} />
        ) : (
          <nav class="sidebar" aria-label={t('tree')} aria-busy="true" />
        )}
        <main id="main" class="doc-main" ref={scroller}>
          <div class="doc-toolbar">
            <TreeToggle open={treeOpen} onToggle={() => setTreeOpen(!treeOpen)} />
            {doc.type === 'page' ? (
              <div role="group" aria-label={t('mode')} class="modes">
                <button type="button" aria-pressed={mode === 'read'} onClick={() => switchMode('read')}>
                  {t('modeRead')}
                </button>
                {canEdit ? (
                  <>
                    <button type="button" aria-pressed={mode === 'edit'} onClick={() => switchMode('edit')}>
                      {t('modeEdit')}
                    </button>
                    <button
                      type="button"
                      aria-pressed={mode === 'source'}
                      onClick={() => {
                        if (handle.current) latest.current.markdown = handle.current.getMarkdown()
                        setSource(latest.current.markdown)
                        sourceText.current = latest.current.markdown
                        setSourceError(null)
                        setMode('source')
                      }}
                    >
                      {t('modeSource')}
                    </button>
                  </>
                ) : null}
              </div>
            ) : null}
            {canEdit ? (
              <span class={`save-state ${state}`} role="status" aria-live="polite" data-state={state} data-saves={saves}>
                {statusText}
                {state === 'failed' ? (
                  <>
                    {' '}
                    <button type="button" onClick={() => void saveNow()}>
                      {t('retry')}
                    </button>
                  </>
                ) : null}
              </span>
            ) : (
              <span class="muted">{t('readOnly')}</span>
            )}
            {doc.type === 'page' ? <IndexBadge idx={idx} /> : null}
            <span class="spacer" />
            {doc.capabilities?.includes('share') || doc.capabilities?.includes('manage') ? (
              <button type="button" onClick={() => setPanel('share')}>
                {t('share')}
              </button>
            ) : null}
            <span class="menu-wrap">
              <button type="button" aria-haspopup="menu" aria-expanded={moreOpen} onClick={() => setMoreOpen(!moreOpen)}>
                {t('more')}
              </button>
              {moreOpen ? (
                <span class="menu right" role="menu">
                  <button type="button" role="menuitem" onClick={() => { setMoreOpen(false); setPanel('history') }}>
                    {t('history')}
                  </button>
                  {doc.type === 'page' && (props.kb?.capabilities?.includes('create') || canEdit) ? (
                    <button
                      type="button"
                      role="menuitem"
                      disabled={state !== 'saved'}
                      title={state !== 'saved' ? t('duplicateSaveFirst') : undefined}
                      onClick={() => { setMoreOpen(false); void duplicate() }}
                    >
                      {t('duplicate')}
                    </button>
                  ) : null}
                  <button
                    type="button"
                    role="menuitem"
                    disabled={state !== 'saved'}
                    title={state !== 'saved' ? t('duplicateSaveFirst') : undefined}
                    onClick={() => { setMoreOpen(false); setPanel('copy') }}
                  >
                    {t('copyTo')}
                  </button>
                  <button type="button" role="menuitem" onClick={() => { setMoreOpen(false); exportMarkdown() }}>
                    {t('exportMarkdown')}
                  </button>
                  <button type="button" role="menuitem" onClick={() => { setMoreOpen(false); void exportZip(`/api/documents/${doc.id}/export`) }}>
                    {exportLabel()}
                  </button>
                  {doc.capabilities?.includes('delete') ? (
                    <button type="button" role="menuitem" onClick={() => { setMoreOpen(false); setPanel('delete') }}>
                      {t('delete')}
                    </button>
                  ) : null}
                </span>
              ) : null}
            </span>
          </div>
          {saveError && state === 'failed' ? <ErrorNote error={saveError} /> : null}
          <ErrorNote error={dupError} />
          {original !== null ? (
            <p class="index-only-note" data-index-only="true">
              {t('indexOnlyFrom')}{' '}
              {original.href ? (
                <a href={original.href} target="_blank" rel="noopener noreferrer">
                  {original.text}
                </a>
              ) : (
                <span>{original.text}</span>
              )}
            </p>
          ) : null}
          {canEdit && mode !== 'read' ? (
            <TitleInput
              value={title}
              onChange={(v) => {
                setTitle(v)
                changed({ title: v })
              }}
              onEnter={() => editorEl.current?.querySelector<HTMLElement>('[contenteditable="true"]')?.focus()}
            />
          ) : (
            <h1 class="doc-title">{title}</h1>
          )}
          {mode === 'source' ? (
            <div class="source">
              <label for="source-text" class="sr-only">
                {t('sourceLabel')}
              </label>
              <textarea
                id="source-text"
                spellcheck={false}
                value={source}
                onInput={(e) => {
                  const v = (e.target as HTMLTextAreaElement).value
                  setSource(v)
                  sourceText.current = v
                }}
              />
              {sourceError ? (
                <p class="error" role="alert">
                  {sourceError.code === 'MARKDOWN_DIALECT_ERROR' && typeof sourceError.body.line === 'number'
                    ? t('sourceError', { line: sourceError.body.line as number, column: sourceError.body.column as number, detail: sourceError.detail })
                    : sourceError.detail || sourceError.code}
                </p>
              ) : null}
              <button type="button" class="primary" onClick={() => void saveSource()}>
                {t('saveSource')}
              </button>
            </div>
          ) : doc.type === 'page' ? (
            <div class="editor" ref={editorEl} />
          ) : null}
        </main>
        {sides ? (
          <Outline headings={mode === 'source' ? [] : hs} container={() => editorEl.current} scroller={() => scroller.current} />
        ) : (
          <aside class="outline" aria-label={t('outline')} />
        )}
      </div>
      {conflict ? (
        <Dialog title={t('conflictTitle')} onClose={() => {}} wide>
          <p>{t('conflictBody', { theirs: conflict.version_no ?? '' })}</p>
          <div class="compare">
            <div>
              <h3 id="mine-h">{t('conflictMine')}</h3>
              <pre aria-labelledby="mine-h">{latest.current.markdown}</pre>
            </div>
            <div>
              <h3 id="theirs-h">{t('conflictTheirs')}</h3>
              <pre aria-labelledby="theirs-h">{conflict.markdown ?? ''}</pre>
            </div>
          </div>
          <details class="conflict-changes">
            <summary>{t('conflictDiff')}</summary>
            <Changes
              label={t('conflictDiff')}
              before={{ title: conflict.title, markdown: conflict.markdown ?? '' }}
              after={{ title: latest.current.title, markdown: latest.current.markdown }}
            />
          </details>
          <div class="actions">
            <button
              type="button"
              onClick={() => {
                replaceText(conflict.markdown ?? '', conflict.current_version_id, conflict.title)
                setIdx({ status: conflict.index_status, error: conflict.index_error })
                setConflict(null)
              }}
            >
              {t('conflictTakeTheirs')}
            </button>
            <button
              type="button"
              class="primary"
              onClick={() => {
                const theirs = conflict.current_version_id
                setConflict(null)
                base.current = { ...base.current, versionId: theirs }
                void saveNow({ baseVersionId: theirs })
              }}
            >
              {t('conflictKeepMine')}
            </button>
          </div>
        </Dialog>
      ) : null}
      {panel === 'copy' ? <CopyDialog kbId={kbId} item={doc} onDone={() => setPanel(null)} /> : null}
      {panel === 'history' ? (
        <HistoryDialog
          doc={doc}
          currentVersionId={base.current.versionId}
          canRestore={canEdit}
          beforeRestore={settleBeforeRestore}
          onClose={() => setPanel(null)}
          onRestored={async () => {
            const fresh = await api.document(doc.id)
            replaceText(fresh.markdown ?? '', fresh.current_version_id, fresh.title)
            setIdx({ status: fresh.index_status, error: fresh.index_error })
            setPanel(null)
          }}
        />
      ) : null}
      {panel === 'delete' ? (
        <Dialog title={t('delete')} onClose={() => setPanel(null)}>
          <DeleteQuestion kbId={kbId} id={doc.id} title={title} />
          <ErrorNote error={saveError} />
          <div class="actions">
            <button type="button" onClick={() => setPanel(null)}>
              {t('cancel')}
            </button>
            <button
              type="button"
              class="danger"
              onClick={() => {
                api
                  .deleteDocument(doc.id)
                  .then(() => {
                    window.clearTimeout(timer.current)
                    setSave('saved') // nothing left to save on a document in the trash
                    invalidate(`tree:${kbId}`)
                    invalidate('recent')
                    navigate(paths.kb(kbId))
                  })
                  .catch(setSaveError)
              }}
            >
              {t('delete')}
            </button>
          </div>
        </Dialog>
      ) : null}
      {panel === 'share' ? (
        <ShareDialog
          objectType="document"
          objectId={doc.id}
          canShare={!!doc.capabilities?.includes('share')}
          canManage={!!doc.capabilities?.includes('manage')}
          permissionMode={doc.permission_mode}
          docVisibility={doc.visibility}
          onChanged={() => {
            invalidate(`doc:${doc.id}`)
            invalidate(`tree:${kbId}`)
          }}
          onClose={() => setPanel(null)}
        />
      ) : null}
    </>
  )
}
