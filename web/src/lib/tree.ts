/** The flat tree of `GET /api/knowledge-bases/:id/tree` as nested nodes (siblings by sort_order). */
import type { S } from '../api/client'

export type TreeItem = S['TreeItem']
export interface TreeNode {
  item: TreeItem
  children: TreeNode[]
  depth: number
}

export function buildTree(items: TreeItem[]): TreeNode[] {
  const byParent = new Map<string | null, TreeItem[]>()
  const ids = new Set(items.map((i) => i.id))
  for (const it of items) {
    // an item whose parent is not listed hangs at the root (the server already does this for
    // hidden parents; this also covers a subtree share whose root is the shared document)
    const p = it.parent_id && ids.has(it.parent_id) ? it.parent_id : null
    if (!byParent.has(p)) byParent.set(p, [])
    byParent.get(p)!.push(it)
  }
  const make = (parent: string | null, depth: number): TreeNode[] =>
    (byParent.get(parent) ?? [])
      .slice()
      .sort((a, b) => a.sort_order - b.sort_order)
      .map((item) => ({ item, depth, children: make(item.id, depth + 1) }))
  return make(null, 0)
}

/** Where a document can go (the Move and Copy to… dialogs): every folder and page in tree
 * order with its depth (a page can hold pages too), leaving out `exclude` and everything under
 * it (a moved document's own subtree). */
export function places(items: TreeItem[], exclude: string | null = null): { item: TreeItem; depth: number }[] {
  const out: { item: TreeItem; depth: number }[] = []
  const walk = (ns: TreeNode[]) => {
    for (const n of ns) {
      if (n.item.id === exclude) continue
      out.push({ item: n.item, depth: n.depth })
      walk(n.children)
    }
  }
  walk(buildTree(items))
  return out
}

/** Ids of `id` and everything under it. */
export function descendants(items: TreeItem[], id: string): Set<string> {
  const out = new Set([id])
  let grew = true
  while (grew) {
    grew = false
    for (const it of items) {
      if (it.parent_id && out.has(it.parent_id) && !out.has(it.id)) {
        out.add(it.id)
        grew = true
      }
    }
  }
  return out
}

/** Headings of a Markdown text, outside fenced code (for the outline). */
export interface Heading {
  level: number
  text: string
}

export function headings(markdown: string): Heading[] {
  const out: Heading[] = []
  let fence: string | null = null
  for (const line of markdown.split('\n')) {
    const f = /^ {0,3}(`{3,}|~{3,}|\$\$)/.exec(line)
    if (f) {
      if (fence === null) fence = f[1][0]
      else if (f[1][0] === fence) fence = null
      continue
    }
    if (fence !== null) continue
    const m = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line)
    if (m) out.push({ level: m[1].length, text: m[2].replace(/[*_`~]|\\(?=.)/g, '') })
  }
  return out
}
