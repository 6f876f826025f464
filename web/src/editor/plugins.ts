// OpenKB's fixes of Crepe 7.22.1 defaults, as Milkdown configuration (no fork). Each is switched
// by openkb/markdown/features.json, and the Python normalizer (openkb/markdown/normalize.py)
// follows the same switches; tests/markdown/test_parity.py proves they agree.
import type { Editor } from '@milkdown/kit/core'
import type { Mark, Node as PMNode } from '@milkdown/kit/prose/model'

import { Decoration, DecorationSet, type EditorView } from '@milkdown/kit/prose/view'

import { imageBlockSchema } from '@milkdown/kit/component/image-block'
import { remarkStringifyOptionsCtx } from '@milkdown/kit/core'
import { linkSchema } from '@milkdown/kit/preset/commonmark'
import { Plugin, Selection, TextSelection } from '@milkdown/kit/prose/state'
import { $prose } from '@milkdown/kit/utils'

import type { Handle } from 'mdast-util-to-markdown'

import { FEATURES, pluginOn } from './features'

/** The resize ratio exactly as the image block writes it into the alt slot (`toFixed(2)`). */
export const RATIO_ALT = /^[0-9]+\.[0-9]{2}$/

/** What the alt slot holds for an image block: its alt text, else a non-1 resize ratio. */
export function imageBlockAlt(alt: string, ratio: number): string {
  if (alt) return alt
  const fixed = Number.parseFloat(String(ratio)).toFixed(2)
  return fixed === '1.00' || fixed === 'NaN' ? '' : fixed
}

/**
 * Milkdown's text handler prints a text node untouched when it holds no `*`, `_` or `\` and
 * ends in a blank (meant for the blanks it moves out of marks), so `costs \$5 and \$6 see `
 * before a link or bold was saved as `costs $5 and $6 see` and read back as a formula, and
 * `\<b\>` as raw HTML. Only a blank-only node is printed as it is here; all other text is
 * escaped like remark's own handler does.
 */
const escapedText: Handle = (node, _parent, state, info) => {
  const value = (node as { value: string }).value
  if (/^\s+$/.test(value)) return value
  return state.safe(value, { ...info, encode: [] })
}

/**
 * remark-stringify options (`bullet: '-'`, `rule: '-'`...) from the registry, through Milkdown's
 * remarkStringifyOptionsCtx. Must run as a config callback: Milkdown builds its remark
 * processor from that slice once, when the editor is created.
 */
export function serializerOptions(editor: Editor): void {
  editor.config((ctx) => {
    ctx.update(remarkStringifyOptionsCtx, (prev) => ({
      ...prev,
      ...FEATURES.serializer,
      handlers: { ...prev.handlers, text: escapedText },
    }))
  })
}

/**
 * Crepe's image block stores only src, caption (the title) and a resize ratio, and writes the
 * ratio into the alt slot: `![alt](src)` alone on a line was saved as `![1.00](src)`, losing the
 * alt text (and indexing "1.00"). This adds an `alt` attribute: an alt of the ratio's shape
 * (`1.50`) is still read as the ratio, any other alt is kept and written back. A resized image
 * that has alt text keeps the alt text (the ratio is not stored then).
 */
export function keepImageAlt(editor: Editor): void {
  if (!pluginOn('image_alt')) return
  editor.config((ctx) => {
    ctx.update(imageBlockSchema.key, (prev) => (c) => {
      const base = prev(c)
      return {
        ...base,
        attrs: { ...base.attrs, alt: { default: '', validate: 'string' } },
        parseDOM: (base.parseDOM ?? []).map((rule) => ({
          ...rule,
          getAttrs: (dom: HTMLElement | string) => {
            const attrs = typeof rule.getAttrs === 'function' ? rule.getAttrs(dom as HTMLElement) : {}
            if (attrs === false || typeof dom === 'string') return attrs
            return { ...(attrs ?? {}), alt: dom.getAttribute('alt') ?? '' }
          },
        })),
        parseMarkdown: {
          match: ({ type }) => type === 'image-block',
          runner: (state, node, type) => {
            const raw = typeof node.alt === 'string' ? node.alt : ''
            let ratio = 1
            let alt = raw
            if (RATIO_ALT.test(raw)) {
              ratio = Number(raw) || 1
              alt = ''
            }
            state.addNode(type, {
              src: typeof node.url === 'string' ? node.url : '',
              caption: typeof node.title === 'string' ? node.title : '',
              ratio,
              alt,
            })
          },
        },
        toMarkdown: {
          match: (node: PMNode) => node.type.name === 'image-block',
          runner: (state, node: PMNode) => {
            state.openNode('paragraph')
            state.addNode('image', undefined, undefined, {
              title: node.attrs.caption,
              url: node.attrs.src,
              alt: imageBlockAlt(String(node.attrs.alt ?? ''), Number(node.attrs.ratio)),
            })
            state.closeNode()
          },
        },
      }
    })
  })
}

/**
 * The image block's view writes its caption into `<img alt>`, so a screen reader got nothing for
 * `![Architecture diagram](asset://...)` (most images have alt text and no caption). The rendered
 * `<img>` gets the node's alt text (kept by keepImageAlt), else the caption as before. Only the
 * element changes, never the document. The view is a Vue component that re-renders the
 * attribute when the caption changes, in a microtask after the update: the text is set again
 * after it.
 */
export function imageAltText(editor: Editor): void {
  if (!pluginOn('image_alt')) return
  editor.use(
    $prose(
      () =>
        new Plugin({
          view: (view) => {
            syncImageAlt(view)
            queueMicrotask(() => syncImageAlt(view))
            return {
              update: (v, prev) => {
                if (v.state.doc !== prev.doc) queueMicrotask(() => syncImageAlt(v))
              },
            }
          },
        }),
    ),
  )
}

function syncImageAlt(view: EditorView): void {
  if (view.isDestroyed) return
  view.state.doc.descendants((node, pos) => {
    if (node.type.name === 'image-block') {
      const dom = view.nodeDOM(pos)
      const img = dom instanceof HTMLElement ? dom.querySelector('img') : null
      const want = String(node.attrs.alt || node.attrs.caption || '')
      if (img && want && img.getAttribute('alt') !== want) img.setAttribute('alt', want)
      return false
    }
    return !node.isTextblock && !node.isAtom // image blocks sit in blocks, never in text
  })
}

const INTERNAL_DOC = /^openkb:\/\/document\/([0-9a-fA-F-]{36})(?=[/?#]|$)/

/** The document id of an internal link (`openkb://document/<id>`), or null. */
export function internalDocumentId(href: string): string | null {
  const m = INTERNAL_DOC.exec(href)
  return m ? m[1]!.toLowerCase() : null
}

/**
 * Default rendering of an internal link when the page gives no resolver: keep the stored
 * `openkb://document/<id>` as the href (Milkdown would blank it), so a click handler can still
 * recognise it.
 */
export function internalDocumentHref(href: string): string | null {
  return internalDocumentId(href) ? href : null
}

/**
 * `openkb://document/<id>` links render as app links. Milkdown's link toDOM blanks every href
 * with an unknown scheme, so the anchor gets the app URL and keeps the stored reference in
 * `data-openkb-href`, which parseDOM reads first: copy/paste inside the editor keeps the
 * `openkb://` reference, and the Markdown (the mark's attrs) never changes.
 */
export function internalLinks(editor: Editor, resolve: (href: string) => string | null = internalDocumentHref): void {
  editor.config((ctx) => {
    ctx.update(linkSchema.key, (prev) => (c) => {
      const base = prev(c)
      return {
        ...base,
        parseDOM: [
          {
            tag: 'a[data-openkb-href]',
            priority: 60,
            getAttrs: (dom: HTMLElement | string) =>
              typeof dom === 'string'
                ? false
                : { href: dom.getAttribute('data-openkb-href') ?? '', title: dom.getAttribute('title') },
          },
          ...(base.parseDOM ?? []),
        ],
        toDOM: (mark: Mark, inline: boolean) => {
          const spec = base.toDOM!(mark, inline)
          const app = resolve(String(mark.attrs.href ?? ''))
          if (!app || !Array.isArray(spec)) return spec
          const [tag, attrs, ...rest] = spec as [string, Record<string, unknown>, ...unknown[]]
          return [tag, { ...attrs, href: app, 'data-openkb-href': mark.attrs.href, class: 'openkb-doc-link' }, ...rest] as never
        },
      }
    })
  })
}

/**
 * Long pages: the stylesheet lets the browser skip laying out a paragraph or heading outside the
 * viewport (`content-visibility`, web/src/styles.css), so a keystroke lays out the blocks on
 * screen, not thousands. The blocks around the selection are marked `pm-near` and always laid
 * out: the slash menu and the caret read the block being edited, and a skipped block answered
 * them before the browser had placed it (the menu failed to open in 3 of 8 tries). The keys that
 * jump to the start or end of the document (Ctrl+Home/End, on a Mac Cmd+Up/Down; with Shift they
 * select) are done here: the browser placed the caret by the skipped last block's layout, at its
 * start instead of its end.
 */
export function keepSelectionLaidOut(editor: Editor): void {
  editor.use(
    $prose(
      () =>
        new Plugin({
          props: {
            handleKeyDown(view, e) {
              const mod = e.ctrlKey || e.metaKey
              const toEnd = mod && !e.altKey && (e.key === 'End' || (e.metaKey && e.key === 'ArrowDown'))
              const toStart = mod && !e.altKey && (e.key === 'Home' || (e.metaKey && e.key === 'ArrowUp'))
              if (!toEnd && !toStart) return false
              const { doc, selection } = view.state
              const target = toEnd ? Selection.atEnd(doc) : Selection.atStart(doc)
              const next = e.shiftKey ? TextSelection.between(selection.$anchor, target.$head) : target
              view.dispatch(view.state.tr.setSelection(next).scrollIntoView())
              return true
            },
            decorations(state) {
              const { doc, selection } = state
              const last = doc.childCount - 1
              if (last < 0) return null
              const from = Math.max(0, selection.$from.index(0) - 2)
              const to = Math.min(last, selection.$to.index(0) + 2)
              const decos: Decoration[] = []
              let pos = selection.$from.posAtIndex(from, 0)
              for (let i = from; i <= to; i++) {
                const size = doc.child(i).nodeSize
                decos.push(Decoration.node(pos, pos + size, { class: 'pm-near' }))
                pos += size
              }
              return DecorationSet.create(doc, decos)
            },
          },
        }),
    ),
  )
}
