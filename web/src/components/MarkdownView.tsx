/**
 * Read mode: the same Crepe build as the editor, read-only (docs/04 §5: a Milkdown-compatible
 * renderer, so what is read is what is edited). No HTML string is ever injected by the app;
 * Crepe renders raw HTML from Markdown as text.
 *
 * Links are sanitized on click: `openkb://document/<id>` opens the document in the app,
 * http(s)/mailto links open in a new tab without an opener, anything else (javascript:, data:)
 * does nothing. The CSP blocks javascript: URLs as well.
 */
import { useEffect, useRef } from 'preact/hooks'
import type { EditorHandle } from '../editor/Editor'

export interface LinkTargets {
  /** The app URL of an internal document link, or null to ignore the click. */
  documentUrl: (docId: string) => string | null
  /** How a stored `asset://<id>` URL loads in the browser. */
  assetUrl: (assetId: string) => string
  navigate: (url: string) => void
}

export function resolveStoredUrl(url: string, targets: LinkTargets): string {
  const m = /^asset:\/\/([0-9a-fA-F-]{36})/.exec(url)
  return m ? targets.assetUrl(m[1]) : url
}

export function handleLinkClick(e: MouseEvent, targets: LinkTargets): void {
  const a = (e.target as Element | null)?.closest?.('a')
  if (!a) return
  const href = a.getAttribute('href') ?? ''
  e.preventDefault()
  const internal = /^openkb:\/\/document\/([0-9a-fA-F-]{36})/.exec(href)
  if (internal) {
    const url = targets.documentUrl(internal[1])
    if (url) targets.navigate(url)
    return
  }
  if (/^(https?:|mailto:)/i.test(href)) {
    window.open(href, '_blank', 'noopener,noreferrer')
  }
}

export function MarkdownView(props: { markdown: string; targets: LinkTargets; label?: string }) {
  const ref = useRef<HTMLDivElement>(null)
  useEffect(() => {
    let handle: EditorHandle | null = null
    let cancelled = false
    const el = ref.current!
    void import('../editor/Editor').then(async ({ mountEditor }) => {
      if (cancelled) return
      handle = await mountEditor(el, {
        markdown: props.markdown,
        readonly: true,
        resolveUrl: (u) => resolveStoredUrl(u, props.targets),
      })
      if (cancelled) void handle.destroy()
      el.setAttribute('data-ready', 'true')
    })
    const onClick = (e: MouseEvent) => handleLinkClick(e, props.targets)
    el.addEventListener('click', onClick)
    return () => {
      cancelled = true
      el.removeEventListener('click', onClick)
      el.removeAttribute('data-ready')
      void handle?.destroy()
    }
  }, [props.markdown])
  return <article class="reader" ref={ref} aria-label={props.label} />
}
