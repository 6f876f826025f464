// Mermaid diagrams (docs/markdown.md#diagrams). A fenced code block whose language is `mermaid`
// stays an ordinary code block in the Markdown (the dialect does not change: the text is what is
// saved, searched and exported); the editor shows the drawn diagram as that block's preview, and
// Read mode the diagram alone.
//
// Mermaid draws in a hidden, sandboxed frame (web/src/diagram-frame.ts says why), loaded
// the first time a page holds a diagram: nothing is loaded from elsewhere, and a page without
// diagrams loads none of it. The drawing reaches the page as an <img> of the SVG (a data: URL): an
// image runs no script and loads nothing, whatever the diagram's text says, and the SVG's own
// <style> applies inside it. Labels are SVG text, not HTML (`htmlLabels: false`).

export const DIAGRAM_LANGUAGE = 'mermaid'
const TIMEOUT_MS = 30_000

type Answer = { id: number; svg?: string; error?: string; ready?: boolean }

let frame: Promise<Window> | null = null
let seq = 0
const waiting = new Map<number, (answer: Answer) => void>()

function drawer(): Promise<Window> {
  frame ??= new Promise<Window>((resolve, reject) => {
    const el = document.createElement('iframe')
    el.src = '/diagram.html'
    el.title = 'diagrams'
    el.tabIndex = -1
    el.setAttribute('aria-hidden', 'true')
    // scripts, but an origin of its own: what runs there cannot reach this page, its cookies or
    // the API, even if a diagram's text got past Mermaid and the frame's own CSP
    el.setAttribute('sandbox', 'allow-scripts')
    // laid out (Mermaid measures its text) but never seen: styles through the CSSOM (the CSP)
    Object.assign(el.style, { position: 'fixed', left: '-10000px', top: '0', width: '1200px', height: '900px', border: '0', visibility: 'hidden' })
    window.addEventListener('message', (e: MessageEvent<Answer>) => {
      if (e.source !== el.contentWindow) return // its origin is opaque ('null'): known by its window
      if (e.data?.ready) return resolve(el.contentWindow!)
      const done = waiting.get(e.data?.id)
      if (done) {
        waiting.delete(e.data.id)
        done(e.data)
      }
    })
    el.addEventListener('error', () => {
      el.remove()
      frame = null // a later diagram tries again with a new frame
      reject(new Error('the diagram page did not load'))
    })
    document.body.appendChild(el)
  })
  return frame
}

function draw(text: string): Promise<string> {
  const id = ++seq
  return new Promise<string>((resolve, reject) => {
    // bounds the frame's start too: a frame that never answers is not waited for forever
    const timer = setTimeout(() => {
      waiting.delete(id)
      reject(new Error('the diagram drawer did not answer'))
    }, TIMEOUT_MS)
    waiting.set(id, (a) => {
      clearTimeout(timer)
      if (a.svg !== undefined) resolve(a.svg)
      else reject(new Error(a.error ?? 'no answer'))
    })
    drawer().then(
      // only that frame's window gets it ('*': the sandboxed frame's origin is opaque)
      (win) => win.postMessage({ id, text, fontFamily: getComputedStyle(document.body).fontFamily }, '*'),
      (error: unknown) => {
        clearTimeout(timer)
        waiting.delete(id)
        reject(error instanceof Error ? error : new Error(String(error)))
      },
    )
  })
}

// the drawing's own size (its viewBox), so a small diagram is not blown up to the page's width
const VIEWBOX = /viewBox="[-\d.]+[ ,]+[-\d.]+[ ,]+([\d.]+)[ ,]+([\d.]+)"/

/**
 * Draw `text` and hand the result to `apply`: an <img class="diagram"> of the SVG, or a
 * <p class="diagram-error"> that says why the text is not a diagram (the code block stays
 * editable either way).
 */
export function renderDiagram(text: string, apply: (value: HTMLElement | null) => void, failed: string): void {
  draw(text)
    .then((svg) => {
      const img = document.createElement('img')
      img.className = 'diagram'
      img.alt = text.trim().split('\n')[0] ?? ''
      const size = VIEWBOX.exec(svg)
      if (size) img.width = Math.ceil(Number(size[1]))
      img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`
      apply(img)
    })
    .catch((error: unknown) => {
      const p = document.createElement('p')
      p.className = 'diagram-error'
      const why = error instanceof Error ? error.message : String(error)
      p.textContent = `${failed}: ${why.split('\n').slice(0, 3).join(' ')}`
      apply(p)
    })
}
