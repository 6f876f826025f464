/**
 * The one place that imports Milkdown/Crepe (house style: nothing else imports Crepe).
 *
 * Pages call `mountEditor(el, options)` and get a small handle back; they never see the Crepe
 * instance, so the editor configuration (feature registry, image alt fix, serializer options)
 * can change here without touching a page. Minimal first version: default Crepe features.
 */
import { Crepe } from '@milkdown/crepe'
import '@milkdown/crepe/theme/common/style.css'
import '@milkdown/crepe/theme/frame.css'

export interface EditorOptions {
  /** The stored Markdown the editor starts from. */
  markdown: string
  /** Read mode: same renderer, no editing. */
  readonly?: boolean
  /** Called with the serialized Markdown after each change (the page debounces autosave). */
  onChange?: (markdown: string) => void
  /** Uploads a pasted/dropped file and returns the URL to store (e.g. `asset://<id>`). */
  onUpload?: (file: File) => Promise<string>
  /** Maps a stored URL (`asset://<id>`) to one the browser can load. */
  resolveUrl?: (url: string) => string
  /** Placeholder text for an empty document. */
  placeholder?: string
}

export interface EditorHandle {
  getMarkdown(): string
  setReadonly(readonly: boolean): void
  destroy(): Promise<void>
}

export async function mountEditor(el: HTMLElement, options: EditorOptions): Promise<EditorHandle> {
  const crepe = new Crepe({
    root: el,
    defaultValue: options.markdown,
    featureConfigs: {
      [Crepe.Feature.Placeholder]: { text: options.placeholder ?? '' },
      [Crepe.Feature.ImageBlock]: {
        ...(options.onUpload ? { onUpload: options.onUpload } : {}),
        ...(options.resolveUrl ? { proxyDomURL: options.resolveUrl } : {}),
      },
    },
  })
  let last = options.markdown
  crepe.on((listener) => {
    listener.markdownUpdated((_ctx, markdown) => {
      if (markdown === last) return
      last = markdown
      options.onChange?.(markdown)
    })
  })
  await crepe.create()
  // The serialized form of what was loaded is the baseline: loading must not look like an edit.
  last = crepe.getMarkdown()
  crepe.setReadonly(!!options.readonly)
  return {
    getMarkdown: () => crepe.getMarkdown(),
    setReadonly: (readonly: boolean) => {
      crepe.setReadonly(readonly)
    },
    destroy: async () => {
      await crepe.destroy()
    },
  }
}
