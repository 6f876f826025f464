/**
 * The one place the app mounts Milkdown/Crepe (house style: nothing else imports Crepe).
 *
 * Pages call `mountEditor(el, options)` and get a small handle back; they never see the Crepe
 * instance. The editor itself is built by `createCrepe()` (./crepe.ts) from the ONE feature
 * registry, openkb/markdown/features.json: Crepe features, serializer options (`-` bullets,
 * `---` rules), toolbar and slash-menu entries, and OpenKB's fixes (image blocks keep their alt
 * text, internal links render as links). web/scripts/parity.mjs runs that same function
 * headless to prove the server's normalizer writes what this editor writes
 * (docs/markdown.md#normalization), so configure the editor there, never here.
 */
import '@milkdown/crepe/theme/common/style.css'
import '@milkdown/crepe/theme/frame.css'

import { editorViewCtx } from '@milkdown/kit/core'
import { styleNonce } from '../lib/nonce'
import { t } from '../lib/i18n'
import { createCrepe } from './crepe'
import type { Lang } from './features'

export interface EditorOptions {
  /** The stored Markdown the editor starts from. */
  markdown: string
  /** Read mode: same renderer, no editing. */
  readonly?: boolean
  /** Called with the serialized Markdown after each change (the page debounces autosave). */
  onChange?: (markdown: string) => void
  /** Uploads a pasted/dropped/chosen image and returns the URL to store (`asset://<id>`). */
  onUpload?: (file: File) => Promise<string>
  /** Maps a stored URL (`asset://<id>`) to one the browser can load (the asset route). */
  resolveUrl?: (url: string) => string
  /**
   * The app URL an internal link (`openkb://document/<id>`) renders with; null keeps the
   * stored reference. The stored reference stays in the anchor's `data-openkb-href`.
   */
  resolveLink?: (href: string) => string | null
  /** Placeholder text for an empty document. */
  placeholder?: string
  /** UI language of the toolbar and slash menu (labels come from features.json). */
  lang?: Lang
}

export interface EditorHandle {
  /** The editor's serialization of what it loaded (the baseline: loading is not an edit). */
  readonly loaded: string
  getMarkdown(): string
  setReadonly(readonly: boolean): void
  destroy(): Promise<void>
}

export async function mountEditor(el: HTMLElement, options: EditorOptions): Promise<EditorHandle> {
  const nonce = styleNonce() // CodeMirror's inline <style> (web/src/lib/nonce.ts)
  const lang: Lang = options.lang ?? (document.documentElement.lang.startsWith('zh') ? 'zh-CN' : 'en')
  const crepe = createCrepe({
    root: el,
    defaultValue: options.markdown,
    lang,
    ...(options.onUpload ? { onUpload: options.onUpload } : {}),
    ...(options.resolveUrl ? { resolveAsset: options.resolveUrl } : {}),
    ...(options.resolveLink ? { resolveLink: options.resolveLink } : {}),
    ...(options.placeholder !== undefined ? { placeholder: options.placeholder } : {}),
    ...(nonce ? { cspNonce: nonce } : {}),
    diagramFailed: t('diagramFailed'),
  })
  let last = options.markdown
  crepe.on((listener) => {
    listener.markdownUpdated((_ctx, markdown) => {
      if (markdown === last) return
      last = markdown
      options.onChange?.(markdown)
    })
  })
  markMissingImages(el) // before create: an image may fail while the editor is still being built
  await crepe.create()
  // The serialized form of what was loaded is the baseline: loading must not look like an edit.
  // Plugins that complete a document (the empty paragraph after a final list or table, which
  // the server's normalized text already ends with) act on its first transaction, which came a
  // moment later from a node view: the text changed by itself after the baseline was taken, the
  // page saved for nothing, and leaving it then asked about unsaved changes. An empty
  // transaction now (kept out of the undo history) settles the document first.
  crepe.editor.action((ctx) => {
    const view = ctx.get(editorViewCtx)
    view.dispatch(view.state.tr.setMeta('addToHistory', false))
  })
  last = crepe.getMarkdown()
  crepe.setReadonly(!!options.readonly)
  return {
    loaded: last,
    getMarkdown: () => crepe.getMarkdown(),
    setReadonly: (readonly: boolean) => {
      crepe.setReadonly(readonly)
    },
    destroy: async () => {
      await crepe.destroy()
    },
  }
}

/**
 * An image that cannot load (its asset was deleted, a link an import could not resolve, a page
 * the reader may see but whose image sits on a page they may not) is shown as a labelled box
 * instead of nothing: an image block without alt text or caption has `alt=""`, and a broken image without
 * alt text takes no space at all, so the reader could not tell anything was there. Only the
 * `<img>` element changes, never the document: ProseMirror ignores changes inside leaf nodes.
 * Image events do not bubble, so both are caught on the way down.
 */
function markMissingImages(root: HTMLElement): void {
  root.addEventListener(
    'error',
    (e) => {
      const img = e.target
      if (!(img instanceof HTMLImageElement) || !img.getAttribute('src')) return
      img.classList.add('image-missing')
      img.title = t('imageUnavailable')
      if (!img.alt) img.alt = t('imageUnavailable')
    },
    true,
  )
  root.addEventListener(
    'load',
    (e) => {
      const img = e.target
      if (img instanceof HTMLImageElement && img.classList.contains('image-missing')) {
        img.classList.remove('image-missing')
        img.removeAttribute('title')
      }
    },
    true,
  )
}
