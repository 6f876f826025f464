/**
 * The left document tree (docs/04 §4): folders and pages the caller can see (the server leaves
 * the others out), new page/folder, rename, delete to the trash, move, drag-and-drop reorder and
 * re-parent, collapse state remembered per knowledge base, the current document highlighted.
 *
 * Accessible as an ARIA tree: one tab stop, arrows move/expand/collapse, Enter opens, F2
 * renames, Delete deletes; every action is also a real button in the item's menu.
 *
 * Trap: `sort_order` in `PUT /api/documents/:id` is the 0-based position among the *new*
 * siblings (the server renumbers the rest), so a drop before an item sends that item's index
 * with the dragged item left out of the count.
 */
import { useEffect, useRef, useState } from 'preact/hooks'
import { api, ApiError } from '../api/client'
import { t } from '../lib/i18n'
import { invalidate, useQuery } from '../lib/query'
import { navigate, paths } from '../lib/router'
import { buildTree, descendants, places, type TreeItem, type TreeNode } from '../lib/tree'
import { droppedFiles, ImportDialog, type PickedFile } from './ImportDialog'
import { exportKbLabel, exportLabel, exportZip } from './ExportDownload'
import { Dialog, ErrorNote, Field } from './ui'

function collapsedKey(kbId: string): string {
  return `openkb.tree.collapsed.${kbId}`
}

function loadCollapsed(kbId: string): Set<string> {
  try {
    return new Set(JSON.parse(localStorage.getItem(collapsedKey(kbId)) ?? '[]') as string[])
  } catch {
    return new Set()
  }
}

type Action =
  | { kind: 'rename' | 'delete' | 'move'; item: TreeItem }
  | { kind: 'copy'; item: TreeItem }
  | { kind: 'new'; type: 'page' | 'folder'; parentId: string | null }

/** Duplicate a page (POST /api/documents/{id}/duplicate): the copy lands right after it in the
 * tree, which is read again, and a page's copy opens. `withChildren`: what is under it is copied
 * too (a folder is copied only so). For the tree's item menu and the document's More menu. */
export async function duplicatePage(kbId: string, id: string, withChildren = false): Promise<void> {
  const copy = await api.duplicateDocument(id, withChildren ? { with_children: true } : {})
  invalidate(`tree:${kbId}`)
  if (copy.type === 'page') navigate(paths.doc(kbId, copy.id)) // a folder's copy shows in the tree, right after it
}

/** Where a drag over a row would put the dragged document: its top quarter places it before
 * the row, its bottom quarter after (docs/web.md#the-document-page), the middle moves it under
 * the row (into a folder, or under a page: a page holds pages too). */
type Zone = 'before' | 'into' | 'after'

function zoneOf(e: DragEvent): Zone {
  const r = (e.currentTarget as HTMLElement).getBoundingClientRect()
  const y = e.clientY - r.top
  return y < r.height / 4 ? 'before' : y > (r.height * 3) / 4 ? 'after' : 'into'
}

export function Tree(props: { kbId: string; currentId: string | null; canCreate: boolean; currentTitle?: string }) {
  const { kbId, currentId } = props
  const tree = useQuery(`tree:${kbId}`, () => api.tree(kbId))
  const [collapsed, setCollapsed] = useState<Set<string>>(() => loadCollapsed(kbId))
  const [focusId, setFocusId] = useState<string | null>(currentId)
  const [action, setAction] = useState<Action | null>(null)
  const [error, setError] = useState<unknown>(null)
  // a ref, not state: the drag events that follow dragstart run before a re-render would hand
  // their handlers the new value, and a dragover that does not see it refuses the drop
  const dragRef = useRef<string | null>(null)
  const [dropTarget, setDropTarget] = useState<{ id: string; zone: Zone } | null>(null)
  const [menuFor, setMenuFor] = useState<string | null>(null)
  const [copying, setCopying] = useState(false)
  // Copy to… needs a knowledge base to create in: this one, or (asked when a menu opens, for a
  // reader here) another
  const kbsForCopy = useQuery(menuFor && !props.canCreate ? 'kbs:all' : null, () => api.knowledgeBases())
  const mayCopy = props.canCreate || !!kbsForCopy.data?.items.some((k) => k.capabilities?.includes('create'))
  // import (docs/importing.md#the-web-app): from a menu, or files/folders dropped from outside
  const [importing, setImporting] = useState<{ parentId: string | null; files?: PickedFile[] } | null>(null)
  const [filesOver, setFilesOver] = useState(false)
  const rootRef = useRef<HTMLUListElement>(null)

  const items = (tree.data?.items ?? []).map((it) => (it.id === currentId && props.currentTitle ? { ...it, title: props.currentTitle } : it))
  const nodes = buildTree(items)
  const byId = new Map(items.map((i) => [i.id, i]))

  // the current document's folders are open
  useEffect(() => {
    if (!currentId || !tree.data) return
    let p = byId.get(currentId)?.parent_id ?? null
    const next = new Set(collapsed)
    let changed = false
    while (p) {
      if (next.delete(p)) changed = true
      p = byId.get(p)?.parent_id ?? null
    }
    if (changed) save(next)
  }, [currentId, tree.data])

  // opened from elsewhere (search, a link, the address), the current page is scrolled into the
  // sidebar's view once its folders are open: once per page, so the reader's own scrolling stays
  const revealed = useRef<string | null>(null)
  useEffect(() => {
    if (!currentId || revealed.current === currentId) return
    const row = rootRef.current?.querySelector<HTMLElement>(`[data-id="${currentId}"] > .row`)
    const pane = row?.closest<HTMLElement>('.sidebar')
    if (!row || !pane || !pane.getClientRects().length) return // a phone's closed drawer: when it opens
    revealed.current = currentId
    const r = row.getBoundingClientRect()
    const p = pane.getBoundingClientRect()
    if (r.top < p.top || r.bottom > p.bottom) pane.scrollTop += r.top - p.top - (p.height - r.height) / 2
  })

  function save(next: Set<string>) {
    setCollapsed(next)
    localStorage.setItem(collapsedKey(kbId), JSON.stringify([...next]))
  }

  function toggle(id: string, open?: boolean) {
    const next = new Set(collapsed)
    const isOpen = !next.has(id)
    if (open === undefined ? isOpen : !open) next.add(id)
    else next.delete(id)
    save(next)
  }

  // a folder, or a page with pages under it (a sub-document, docs/permissions.md), opens and closes
  const expandable = (n: TreeNode) => n.item.type === 'folder' || n.children.length > 0
  const visible: TreeNode[] = []
  const walk = (ns: TreeNode[]) => {
    for (const n of ns) {
      visible.push(n)
      if (expandable(n) && !collapsed.has(n.item.id)) walk(n.children)
    }
  }
  walk(nodes)

  function open(item: TreeItem) {
    if (item.type === 'folder') toggle(item.id)
    else navigate(paths.doc(kbId, item.id))
  }

  function focusItem(id: string) {
    setFocusId(id)
    requestAnimationFrame(() => rootRef.current?.querySelector<HTMLElement>(`[data-id="${id}"]`)?.focus())
  }

  function onKeyDown(e: KeyboardEvent, n: TreeNode) {
    const i = visible.findIndex((v) => v.item.id === n.item.id)
    const folderOpen = expandable(n) && !collapsed.has(n.item.id)
    if (e.altKey && (e.key === 'ArrowUp' || e.key === 'ArrowDown')) {
      if (props.canCreate) shift(n.item, e.key === 'ArrowUp' ? -1 : 1)
      e.preventDefault()
      e.stopPropagation()
      return
    }
    switch (e.key) {
      case 'ArrowDown':
        if (i + 1 < visible.length) focusItem(visible[i + 1].item.id)
        break
      case 'ArrowUp':
        if (i > 0) focusItem(visible[i - 1].item.id)
        break
      case 'ArrowRight':
        if (expandable(n) && !folderOpen) toggle(n.item.id, true)
        else if (folderOpen && n.children.length) focusItem(n.children[0].item.id)
        break
      case 'ArrowLeft':
        if (folderOpen) toggle(n.item.id, false)
        else if (n.item.parent_id && byId.has(n.item.parent_id)) focusItem(n.item.parent_id)
        break
      case 'Home':
        if (visible.length) focusItem(visible[0].item.id)
        break
      case 'End':
        if (visible.length) focusItem(visible[visible.length - 1].item.id)
        break
      case 'Enter':
        open(n.item)
        break
      case 'F2':
        setAction({ kind: 'rename', item: n.item })
        break
      case 'Delete':
        setAction({ kind: 'delete', item: n.item })
        break
      default:
        return
    }
    e.preventDefault()
    e.stopPropagation()
  }

  // placed beside a sibling by its id, not by a position counted in this tree: the tree leaves
  // out what the reader cannot see, the server's positions count it (docs/api.md#moving-and-reordering)
  async function move(id: string, parentId: string | null, beside: { before_id?: string; after_id?: string } = {}) {
    setError(null)
    try {
      await api.updateDocument(id, { parent_id: parentId, ...beside })
      if (parentId) {
        const next = new Set(collapsed)
        next.delete(parentId)
        save(next)
      }
    } catch (e) {
      setError(e)
    }
    invalidate(`tree:${kbId}`)
    invalidate(`doc:${id}`)
  }

  async function duplicate(id: string, withChildren = false) {
    setError(null)
    setCopying(true) // a folder of hundreds of pages takes seconds (docs/api.md#duplicating-a-page)
    await duplicatePage(kbId, id, withChildren).catch(setError)
    setCopying(false)
  }

  const carriesFiles = (e: DragEvent) => !dragRef.current && !!e.dataTransfer?.types?.includes('Files')

  function dropFiles(e: DragEvent, parentId: string | null) {
    e.preventDefault()
    e.stopPropagation()
    setDropTarget(null)
    setFilesOver(false)
    if (!e.dataTransfer) return
    void droppedFiles(e.dataTransfer).then((files) => files.length && setImporting({ parentId, files }))
  }

  function onDrop(e: DragEvent, n: TreeNode, open: boolean) {
    const target = n.item
    if (props.canCreate && carriesFiles(e)) return dropFiles(e, target.type === 'folder' ? target.id : (target.parent_id ?? null))
    e.preventDefault()
    setDropTarget(null)
    const id = dragRef.current ?? e.dataTransfer?.getData('application/x-openkb-document')
    dragRef.current = null
    if (!id || id === target.id) return
    if (descendants(items, id).has(target.id)) return // never into itself, nor beside something under itself
    const zone = zoneOf(e)
    if (zone === 'into') {
      void move(id, target.id) // last under it: a page holds pages as a folder does
    } else if (zone === 'after' && open && n.children.length) {
      // the line shows between it and its first child: first under it
      const first = n.children[0].item.id
      if (first !== id) void move(id, target.id, { before_id: first })
    } else {
      void move(id, target.parent_id ?? null, zone === 'before' ? { before_id: target.id } : { after_id: target.id })
    }
  }

  /** The sibling before (-1) or after (1) ``item`` under its own parent, as this tree lists them. */
  function neighbour(item: TreeItem, by: -1 | 1): TreeItem | undefined {
    const siblings = items.filter((x) => (x.parent_id ?? null) === (item.parent_id ?? null)).sort((a, b) => a.sort_order - b.sort_order)
    const i = siblings.findIndex((x) => x.id === item.id)
    return i < 0 ? undefined : siblings[i + by]
  }

  /** Move up / Move down (the menu, Alt+Up/Down): dragging is not the only way to reorder. */
  function shift(item: TreeItem, by: -1 | 1) {
    const next = neighbour(item, by)
    if (!next) return
    void move(item.id, item.parent_id ?? null, by < 0 ? { before_id: next.id } : { after_id: next.id }).then(() => focusItem(item.id))
  }

  const renderNodes = (ns: TreeNode[], level: number) =>
    ns.map((n) => {
      const it = n.item
      const isFolder = it.type === 'folder'
      const canOpen = expandable(n)
      const isOpen = canOpen && !collapsed.has(it.id)
      const tabbable = focusId ? focusId === it.id : visible[0]?.item.id === it.id
      return (
        <li
          key={it.id}
          role="treeitem"
          data-id={it.id}
          aria-label={it.title}
          aria-level={level}
          aria-expanded={canOpen ? isOpen : undefined}
          aria-selected={it.id === currentId}
          aria-current={it.id === currentId ? 'page' : undefined}
          tabIndex={tabbable ? 0 : -1}
          onKeyDown={(e) => onKeyDown(e, n)}
          onFocus={(e) => {
            if (e.target === e.currentTarget) setFocusId(it.id)
          }}
        >
          <div
            class={`row${it.id === currentId ? ' current' : ''}${dropTarget?.id === it.id ? ` drop${dropTarget.zone === 'into' ? '' : `-${dropTarget.zone}`}` : ''}`}
            style={{
              paddingLeft: `${(level - 1) * 14 + 4}px`,
              // where a before/after line starts: at this row's level, or its children's when the
              // line between an open row and its first child puts the item first inside
              '--drop-indent': `${(dropTarget?.id === it.id && dropTarget.zone === 'after' && isOpen && n.children.length ? level : level - 1) * 14 + 4}px`,
            }}
            draggable={props.canCreate}
            onDragStart={(e) => {
              dragRef.current = it.id
              e.dataTransfer?.setData('application/x-openkb-document', it.id)
              if (e.dataTransfer) e.dataTransfer.effectAllowed = 'move'
            }}
            onDragEnd={() => {
              dragRef.current = null
              setDropTarget(null)
            }}
            onDragOver={(e) => {
              if (props.canCreate && carriesFiles(e)) {
                e.preventDefault()
                if (dropTarget?.id !== it.id || dropTarget.zone !== 'into') setDropTarget({ id: it.id, zone: 'into' })
                return
              }
              if (!dragRef.current || dragRef.current === it.id) return
              e.preventDefault()
              const zone = zoneOf(e)
              if (dropTarget?.id !== it.id || dropTarget.zone !== zone) setDropTarget({ id: it.id, zone })
            }}
            onDragLeave={(e) => {
              // a leave from the row into its own twisty or label (or back) is no leave: the line
              // would flicker off until the next dragover
              const to = e.relatedTarget
              if (to instanceof Node && (e.currentTarget as HTMLElement).contains(to)) return
              setDropTarget((d) => (d?.id === it.id ? null : d))
            }}
            onDrop={(e) => onDrop(e, n, isOpen)}
          >
            {canOpen ? (
              <button type="button" class="twisty" tabIndex={-1} aria-label={isOpen ? t('collapse') : t('expand')} onClick={() => toggle(it.id)}>
                {isOpen ? '▾' : '▸'}
              </button>
            ) : (
              <span class="twisty" aria-hidden="true">
                •
              </span>
            )}
            {isFolder ? (
              <span class="label folder" onClick={() => toggle(it.id)}>
                {it.title}
              </span>
            ) : (
              <a class="label" tabIndex={-1} href={paths.doc(kbId, it.id)}>
                {it.title}
              </a>
            )}
            {(
              <span class="menu-wrap">
                <button
                  type="button"
                  class="more"
                  tabIndex={-1}
                  aria-haspopup="menu"
                  aria-expanded={menuFor === it.id}
                  aria-label={t('itemActions', { title: it.title })}
                  onClick={() => setMenuFor(menuFor === it.id ? null : it.id)}
                >
                  ⋯
                </button>
                {menuFor === it.id ? (
                  <span class="menu" role="menu" onKeyDown={(e) => e.key === 'Escape' && setMenuFor(null)}>
                    {isFolder && props.canCreate ? (
                      <>
                        <button type="button" role="menuitem" onClick={() => { setMenuFor(null); setAction({ kind: 'new', type: 'page', parentId: it.id }) }}>
                          {t('newPage')}
                        </button>
                        <button type="button" role="menuitem" onClick={() => { setMenuFor(null); setAction({ kind: 'new', type: 'folder', parentId: it.id }) }}>
                          {t('newFolder')}
                        </button>
                        <button type="button" role="menuitem" onClick={() => { setMenuFor(null); setImporting({ parentId: it.id }) }}>
                          {t('importAction')}
                        </button>
                        <button type="button" role="menuitem" onClick={() => { setMenuFor(null); void duplicate(it.id, true) }}>
                          {t('duplicate')}
                        </button>
                      </>
                    ) : null}
                    {!isFolder && props.canCreate ? (
                      <>
                        <button type="button" role="menuitem" onClick={() => { setMenuFor(null); setAction({ kind: 'new', type: 'page', parentId: it.id }) }}>
                          {t('newSubpage')}
                        </button>
                        <button type="button" role="menuitem" onClick={() => { setMenuFor(null); void duplicate(it.id) }}>
                          {t('duplicate')}
                        </button>
                        {n.children.length ? (
                          <button type="button" role="menuitem" onClick={() => { setMenuFor(null); void duplicate(it.id, true) }}>
                            {t('duplicateWithChildren')}
                          </button>
                        ) : null}
                      </>
                    ) : null}
                    {props.canCreate ? (
                      <>
                        <button type="button" role="menuitem" onClick={() => { setMenuFor(null); setAction({ kind: 'rename', item: it }) }}>
                          {t('rename')}
                        </button>
                        <button type="button" role="menuitem" onClick={() => { setMenuFor(null); setAction({ kind: 'move', item: it }) }}>
                          {t('move')}
                        </button>
                        {neighbour(it, -1) ? (
                          <button type="button" role="menuitem" aria-keyshortcuts="Alt+ArrowUp" onClick={() => { setMenuFor(null); shift(it, -1) }}>
                            {t('moveUp')}
                          </button>
                        ) : null}
                        {neighbour(it, 1) ? (
                          <button type="button" role="menuitem" aria-keyshortcuts="Alt+ArrowDown" onClick={() => { setMenuFor(null); shift(it, 1) }}>
                            {t('moveDown')}
                          </button>
                        ) : null}
                      </>
                    ) : null}
                    {/* a reader may copy what they can read to where they may create, and export it (docs/export.md) */}
                    {mayCopy ? (
                      <button type="button" role="menuitem" onClick={() => { setMenuFor(null); setAction({ kind: 'copy', item: it }) }}>
                        {t('copyTo')}
                      </button>
                    ) : null}
                    <button type="button" role="menuitem" onClick={() => { setMenuFor(null); void exportZip(`/api/documents/${it.id}/export`) }}>
                      {exportLabel()}
                    </button>
                    {props.canCreate ? (
                      <button type="button" role="menuitem" onClick={() => { setMenuFor(null); setAction({ kind: 'delete', item: it }) }}>
                        {t('delete')}
                      </button>
                    ) : null}
                  </span>
                ) : null}
              </span>
            )}
          </div>
          {isOpen && n.children.length ? <ul role="group">{renderNodes(n.children, level + 1)}</ul> : null}
        </li>
      )
    })

  // A page readable through its own collaborators (an invitation to that page) inside a
  // knowledge base the reader may not read: the tree answers 404. Its panel then holds that page
  // alone, with no link to the knowledge base's home or export, which would only say "Not found".
  if (tree.error instanceof ApiError && tree.error.status === 404 && currentId) {
    return (
      <nav class="sidebar" aria-label={t('tree')}>
        <p class="muted small">{t('treeThisPageOnly')}</p>
        <ul role="tree" aria-label={t('tree')}>
          <li role="treeitem" aria-current="page" aria-selected="true">
            <div class="row current">
              <span class="label">{props.currentTitle}</span>
            </div>
          </li>
        </ul>
      </nav>
    )
  }

  return (
    <nav
      class={`sidebar${filesOver ? ' drop-files' : ''}`}
      aria-label={t('tree')}
      title={props.canCreate ? t('importDropHint') : undefined}
      onDragOver={(e) => {
        if (!props.canCreate || !carriesFiles(e)) return
        e.preventDefault()
        setFilesOver(true)
      }}
      onDragLeave={(e) => {
        if (e.currentTarget === e.target) setFilesOver(false)
      }}
      onDrop={(e) => props.canCreate && carriesFiles(e) && dropFiles(e, null)}
    >
      <div class="sidebar-head">
        <a href={paths.kb(kbId)}>{t('kbHome')}</a>
        <button type="button" class="tree-export" onClick={() => void exportZip(`/api/knowledge-bases/${kbId}/export`)}>
          {exportKbLabel()}
        </button>
        {props.canCreate ? (
          <span class="tree-actions">
            <button type="button" onClick={() => setAction({ kind: 'new', type: 'page', parentId: null })}>
              {t('newPage')}
            </button>
            <button type="button" onClick={() => setAction({ kind: 'new', type: 'folder', parentId: null })}>
              {t('newFolder')}
            </button>
            <button type="button" onClick={() => setImporting({ parentId: null })}>
              {t('importAction')}
            </button>
          </span>
        ) : null}
      </div>
      <ErrorNote error={tree.error ?? error} />
      {copying ? (
        <p class="muted" role="status">
          {t('copying')}
        </p>
      ) : null}
      {tree.data && nodes.length === 0 ? <p class="muted">{t('emptyTree')}</p> : null}
      <ul role="tree" aria-label={t('tree')} ref={rootRef}>
        {renderNodes(nodes, 1)}
      </ul>
      {importing ? (
        <ImportDialog
          kbId={kbId}
          parentId={importing.parentId}
          parentTitle={importing.parentId ? byId.get(importing.parentId)?.title : undefined}
          files={importing.files}
          onClose={() => setImporting(null)}
        />
      ) : null}
      {action ? <TreeActionDialog kbId={kbId} action={action} items={items} onDone={() => setAction(null)} currentId={currentId} /> : null}
    </nav>
  )
}

function TreeActionDialog(props: { kbId: string; action: Action; items: TreeItem[]; currentId: string | null; onDone: () => void }) {
  const { action, kbId } = props
  const [title, setTitle] = useState(action.kind === 'rename' ? action.item.title : '')
  const [target, setTarget] = useState<string>(action.kind === 'move' ? (action.item.parent_id ?? '') : '')
  const [error, setError] = useState<unknown>(null)

  const finish = (docId?: string) => {
    invalidate(`tree:${kbId}`)
    if (docId) invalidate(`doc:${docId}`)
    props.onDone()
  }

  if (action.kind === 'delete') {
    return (
      <Dialog title={t('delete')} onClose={props.onDone}>
        <DeleteQuestion kbId={kbId} id={action.item.id} title={action.item.title} />
        <ErrorNote error={error} />
        <div class="actions">
          <button type="button" onClick={props.onDone}>
            {t('cancel')}
          </button>
          <button
            type="button"
            class="danger"
            onClick={() => {
              api
                .deleteDocument(action.item.id)
                .then(() => {
                  finish(action.item.id)
                  if (descendants(props.items, action.item.id).has(props.currentId ?? '')) navigate(paths.kb(kbId))
                })
                .catch(setError)
            }}
          >
            {t('delete')}
          </button>
        </div>
      </Dialog>
    )
  }
  if (action.kind === 'copy') {
    return <CopyDialog kbId={kbId} item={action.item} onDone={props.onDone} />
  }
  if (action.kind === 'move') {
    return (
      <Dialog title={t('move')} onClose={props.onDone}>
        <form
          onSubmit={(e) => {
            e.preventDefault()
            api
              .updateDocument(action.item.id, { parent_id: target || null })
              .then(() => finish(action.item.id))
              .catch(setError)
          }}
        >
          <PlaceSelect
            id="move-target"
            label={t('moveTo', { title: action.item.title })}
            value={target}
            items={props.items}
            exclude={action.item.id}
            onChange={setTarget}
          />
          <ErrorNote error={error} />
          <div class="actions">
            <button type="button" onClick={props.onDone}>
              {t('cancel')}
            </button>
            <button type="submit" class="primary">
              {t('move')}
            </button>
          </div>
        </form>
      </Dialog>
    )
  }
  const isNew = action.kind === 'new'
  const heading = isNew ? (action.type === 'page' ? t('newPage') : t('newFolder')) : t('rename')
  return (
    <Dialog title={heading} onClose={props.onDone}>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          if (action.kind === 'new') {
            api
              .createDocument({ knowledge_base_id: kbId, parent_id: action.parentId, type: action.type, title: title || t('untitled'), markdown: action.type === 'page' ? '' : null })
              .then((doc) => {
                finish()
                if (doc.type === 'page') navigate(paths.doc(kbId, doc.id))
              })
              .catch(setError)
          } else if (action.kind === 'rename') {
            api
              .updateDocument(action.item.id, { title })
              .then(() => finish(action.item.id))
              .catch(setError)
          }
        }}
      >
        <Field label={t('title')} name="item-title" value={title} onInput={setTitle} required={!isNew} />
        <ErrorNote error={error} />
        <div class="actions">
          <button type="button" onClick={props.onDone}>
            {t('cancel')}
          </button>
          <button type="submit" class="primary">
            {isNew ? t('create') : t('save')}
          </button>
        </div>
      </form>
    </Dialog>
  )
}


/** The trash question of the tree's item menu and the document's More menu: what is under a
 * document goes to the trash with it (docs/web.md), so the question says how much, as far as
 * the caller sees (their tree, read already by the tree beside it). */
export function DeleteQuestion(props: { kbId: string; id: string; title: string }) {
  const tree = useQuery(`tree:${props.kbId}`, () => api.tree(props.kbId))
  const under = tree.data ? descendants(tree.data.items, props.id).size - 1 : 0
  return <p>{under > 0 ? t('deleteConfirmUnder', { title: props.title, count: under }) : t('deleteConfirm', { title: props.title })}</p>
}

/** Copy to… (docs/web.md), for every reader, from the tree's item menu and the document's More
 * menu: a knowledge base the caller may create in, then a folder of it (or its top); a page with
 * pages under it may take them along, a folder always does. The copy keeps its title there; a
 * page's copy opens, a folder's shows in that knowledge base's tree. */
export function CopyDialog(props: { kbId: string; item: { id: string; title: string; type: string }; onDone: () => void }) {
  const { item } = props
  const kbs = useQuery('kbs:all', () => api.knowledgeBases())
  // whether there are pages under it: from the tree of its own knowledge base (read already by
  // the tree beside it, so usually no request)
  const here = useQuery(`tree:${props.kbId}`, () => api.tree(props.kbId))
  const hasChildren = !!here.data?.items.some((i) => i.parent_id === item.id)
  const [picked, setPicked] = useState(props.kbId)
  const [parent, setParent] = useState('')
  const [withChildren, setWithChildren] = useState(item.type === 'folder')
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(null)
  const writable = (kbs.data?.items ?? []).filter((k) => k.capabilities?.includes('create'))
  // this knowledge base first, when one may create in it; else the first that allows it
  const kbId = writable.some((k) => k.id === picked) ? picked : (writable[0]?.id ?? '')
  const tree = useQuery(kbId ? `tree:${kbId}` : null, () => api.tree(kbId))
  const nowhere = !!kbs.data && writable.length === 0
  return (
    <Dialog title={t('copyTo')} onClose={props.onDone}>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          setBusy(true)
          setError(null)
          api
            .duplicateDocument(item.id, { knowledge_base_id: kbId, parent_id: parent || null, with_children: withChildren })
            .then((copy) => {
              invalidate(`tree:${kbId}`)
              props.onDone()
              if (copy.type === 'page') navigate(paths.doc(kbId, copy.id))
              else if (kbId !== props.kbId) navigate(paths.kb(kbId))
            })
            .catch((err) => {
              setError(err)
              setBusy(false)
            })
        }}
      >
        <div class="field">
          <label for="copy-kb">{t('copyKb', { title: item.title })}</label>
          <select
            id="copy-kb"
            value={kbId}
            onChange={(e) => {
              setPicked((e.target as HTMLSelectElement).value)
              setParent('')
            }}
          >
            {writable.map((k) => (
              <option key={k.id} value={k.id}>
                {k.title}
              </option>
            ))}
          </select>
        </div>
        <PlaceSelect id="copy-parent" label={t('copyPlace')} value={parent} items={tree.data?.items ?? []} exclude={null} onChange={setParent} />
        {item.type === 'page' && hasChildren ? (
          <label class="check">
            <input type="checkbox" checked={withChildren} onChange={(e) => setWithChildren((e.target as HTMLInputElement).checked)} /> {t('withSubpages')}
          </label>
        ) : null}
        {nowhere ? <p class="muted">{t('copyNowhere')}</p> : null}
        <ErrorNote error={kbs.error ?? tree.error ?? error} />
        <div class="actions">
          <button type="button" onClick={props.onDone}>
            {t('cancel')}
          </button>
          <button type="submit" class="primary" disabled={busy || !kbId}>
            {busy ? t('copying') : t('copyAction')}
          </button>
        </div>
      </form>
    </Dialog>
  )
}

/** A place in a knowledge base (the Move and Copy to… dialogs): its top ("") or any folder or
 * page of ``items`` but ``exclude``'s subtree, in tree order, indented by depth as in the tree;
 * a folder is marked as one (a page and a folder may share a title). */
function PlaceSelect(props: { id: string; label: string; value: string; items: TreeItem[]; exclude: string | null; onChange: (id: string) => void }) {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      <select id={props.id} value={props.value} onChange={(e) => props.onChange((e.target as HTMLSelectElement).value)}>
        <option value="">{t('moveRoot')}</option>
        {places(props.items, props.exclude).map(({ item, depth }) => (
          <option key={item.id} value={item.id}>
            {'\u00a0\u00a0\u00a0'.repeat(depth + 1) + (item.type === 'folder' ? t('placeFolder', { title: item.title }) : item.title)}
          </option>
        ))}
      </select>
    </div>
  )
}
