// The page that draws Mermaid diagrams for the app (docs/markdown.md#diagrams), in a hidden,
// sandboxed frame (/diagram.html, server/web/__init__.py): its scripts run with an origin of their
// own, so they cannot reach the app's page, cookies or API.
//
// Why a frame: Mermaid lays a diagram out by drawing it into a live page, with a <style> element
// and style="..." attributes, which the app's CSP refuses (it allows styles only from files, from
// nonced <style> elements and through the CSSOM). This page's own CSP allows inline styles and
// nothing else that the app's forbids: scripts from this origin only, no connections, no
// requests of any kind besides its own script files. It answers each request of its parent (and
// only its parent) with the SVG text, which the app shows as an image.
import mermaid from 'mermaid'

type Ask = { id: number; text: string; fontFamily: string }

let font = ''
let seq = 0

window.addEventListener('message', (e: MessageEvent<Ask>) => {
  // the app's page: the origin this frame was loaded from (its own is opaque in the sandbox)
  if (e.origin !== location.origin || e.source !== window.parent) return
  const { id, text, fontFamily } = e.data
  if (typeof id !== 'number' || typeof text !== 'string') return
  if (fontFamily !== font) {
    font = fontFamily
    mermaid.initialize({
      startOnLoad: false,
      securityLevel: 'strict',
      htmlLabels: false,
      flowchart: { htmlLabels: false },
      fontFamily: font,
    })
  }
  document.body.style.fontFamily = font
  void mermaid
    .render(`diagram-${++seq}`, text)
    .then(({ svg }) => window.parent.postMessage({ id, svg }, location.origin))
    .catch((error: unknown) => {
      const why = error instanceof Error ? error.message : String(error)
      window.parent.postMessage({ id, error: why }, location.origin)
    })
})
window.parent.postMessage({ ready: true }, location.origin)
