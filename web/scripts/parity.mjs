// Parity of the Python dialect with the shipped editor (docs/markdown.md#normalization).
//
//   node web/scripts/parity.mjs            write tests/markdown/parity/expected/<name>.md
//   node web/scripts/parity.mjs --check    fail if a regenerated output differs from the file
//
// Runs the exact editor configuration the app ships (web/src/editor/crepe.ts, loaded through
// Vite so its TypeScript and the features.json import resolve as in the build) headless under
// jsdom over tests/markdown/parity/corpus/*.md, and stores what Crepe's getMarkdown() returns.
// tests/markdown/test_parity.py then asserts Python normalize() writes the same bytes, with no
// Node needed. Trap: prosemirror-model must be 1.25.11 (web/package.json overrides); 1.25.12
// silently drops images without a title, and every image case here would go wrong.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { JSDOM } from 'jsdom'

const here = dirname(fileURLToPath(import.meta.url))
const webDir = resolve(here, '..')
const repo = resolve(webDir, '..')
const corpusDir = join(repo, 'tests/markdown/parity/corpus')
const expectedDir = join(repo, 'tests/markdown/parity/expected')
const check = process.argv.includes('--check')

// --- a browser-enough global scope for Crepe (measured: byte-identical to Chromium) ---------
const dom = new JSDOM('<!doctype html><html><body><div id="app"></div></body></html>', {
  url: 'http://localhost/',
  pretendToBeVisual: true,
})
const w = dom.window
for (const k of Object.getOwnPropertyNames(w)) {
  if (k in globalThis) continue
  try {
    globalThis[k] = w[k]
  } catch {}
}
globalThis.window = w
globalThis.document = w.document
try {
  globalThis.navigator = w.navigator
} catch {}
globalThis.addEventListener = w.addEventListener.bind(w)
globalThis.removeEventListener = w.removeEventListener.bind(w)
globalThis.dispatchEvent = w.dispatchEvent.bind(w)
globalThis.Event = w.Event
globalThis.CustomEvent = w.CustomEvent
class Obs {
  observe() {}
  unobserve() {}
  disconnect() {}
  takeRecords() {
    return []
  }
}
globalThis.IntersectionObserver = w.IntersectionObserver = Obs
globalThis.ResizeObserver = w.ResizeObserver = Obs
w.matchMedia = globalThis.matchMedia = () => ({
  matches: false,
  addListener() {},
  removeListener() {},
  addEventListener() {},
  removeEventListener() {},
})
w.HTMLElement.prototype.scrollIntoView = function () {}
const noRects = () => ({ length: 0, item: () => null, [Symbol.iterator]: function* () {} })
w.Range.prototype.getBoundingClientRect = () => ({ x: 0, y: 0, width: 0, height: 0, top: 0, left: 0, right: 0, bottom: 0 })
w.Range.prototype.getClientRects = noRects
w.Element.prototype.getClientRects = noRects

// --- the shipped configuration, loaded like the build loads it ------------------------------
const { createServer } = await import('vite')
const server = await createServer({
  root: webDir,
  configFile: false,
  logLevel: 'error',
  appType: 'custom',
  server: { middlewareMode: true, hmr: false, watch: null },
  optimizeDeps: { noDiscovery: true, include: [] },
})
const { createCrepe } = await server.ssrLoadModule('/src/editor/crepe.ts')
const { replaceAll } = await import('@milkdown/kit/utils')
await server.close()

// KaTeX warns on CJK in math mode; the output is what matters here.
console.warn = () => {}
// replaceAll without flush: a transaction, as typing makes, so the trailing-paragraph plugin
// runs as it does in the app (a document ending in a list/code/table/... gets one more blank
// line).
const crepe = createCrepe({ root: w.document.getElementById('app') })
await crepe.create()

const names = readdirSync(corpusDir)
  .filter((n) => n.endsWith('.md'))
  .sort()
if (!names.length) {
  console.error(`no corpus documents in ${corpusDir}`)
  process.exit(1)
}
mkdirSync(expectedDir, { recursive: true })
const differ = []
const failed = []
for (const name of names) {
  const md = readFileSync(join(corpusDir, name), 'utf8')
  let out
  try {
    crepe.editor.action(replaceAll(md))
    out = crepe.getMarkdown()
  } catch (e) {
    failed.push(`${name}: ${e && e.message}`)
    continue
  }
  const target = join(expectedDir, name)
  if (check) {
    const old = existsSync(target) ? readFileSync(target, 'utf8') : null
    if (old !== out) differ.push(name)
  } else {
    writeFileSync(target, out)
  }
}
// --- behaviours the corpus cannot show: edits made through the editor UI -------------------
// The image block's resize handle and caption input set node attributes; these are the same
// transactions, checked on the shipped configuration.
const { editorViewCtx } = await import('@milkdown/kit/core')
function withImageBlock(md, attrs) {
  crepe.editor.action(replaceAll(md))
  crepe.editor.action((ctx) => {
    const view = ctx.get(editorViewCtx)
    let pos = -1
    view.state.doc.descendants((node, p) => {
      if (pos < 0 && node.type.name === 'image-block') pos = p
    })
    if (pos < 0) throw new Error(`no image block in ${JSON.stringify(md)}`)
    let tr = view.state.tr
    for (const [k, v] of Object.entries(attrs)) tr = tr.setNodeAttribute(pos, k, v)
    view.dispatch(tr)
  })
  return crepe.getMarkdown()
}
const behaviours = [
  ['resized image without alt keeps its ratio', () => withImageBlock('![](a.png)', { ratio: 1.5 }), '![1.50](a.png)\n\n'],
  ['resized image with alt keeps its alt', () => withImageBlock('![架构图](a.png)', { ratio: 0.5 }), '![架构图](a.png)\n\n'],
  ['caption edit keeps the alt', () => withImageBlock('![alt](a.png)', { caption: '说明' }), '![alt](a.png "说明")\n\n'],
  ['resized back to 1 drops the ratio', () => withImageBlock('![0.50](a.png)', { ratio: 1 }), '![](a.png)\n\n'],
  [
    'internal links render with their reference kept',
    () => {
      crepe.editor.action(replaceAll('[文档](openkb://document/123e4567-e89b-12d3-a456-426614174000)'))
      const a = w.document.querySelector('#app a[data-openkb-href]')
      return a ? `${a.getAttribute('href')} ${a.getAttribute('data-openkb-href')}` : 'no anchor'
    },
    'openkb://document/123e4567-e89b-12d3-a456-426614174000 openkb://document/123e4567-e89b-12d3-a456-426614174000',
  ],
]
// A pasted or dropped image goes through the page's onUpload and is stored as what it returns.
const { uploadConfig } = await import('@milkdown/kit/plugin/upload')
const uploadRoot = w.document.createElement('div')
w.document.body.appendChild(uploadRoot)
const uploaded = []
const uploading = createCrepe({
  root: uploadRoot,
  onUpload: async (file) => {
    uploaded.push(file.name)
    return 'asset://123e4567-e89b-12d3-a456-426614174000'
  },
})
await uploading.create()
const dropped = await new Promise((resolveDrop) => {
  uploading.editor.action(async (ctx) => {
    const view = ctx.get(editorViewCtx)
    const file = new w.File(['x'], 'shot.png', { type: 'image/png' })
    const files = { length: 1, item: (i) => (i === 0 ? file : null) }
    const nodes = await ctx.get(uploadConfig.key).uploader(files, view.state.schema, ctx)
    view.dispatch(view.state.tr.replaceWith(0, view.state.doc.content.size, nodes))
    resolveDrop(uploading.getMarkdown())
  })
})
behaviours.push([
  'a dropped image is uploaded through onUpload and stored as its asset reference',
  () => `${uploaded.join(',')} ${dropped}`,
  'shot.png ![](asset://123e4567-e89b-12d3-a456-426614174000)\n\n',
])
await uploading.destroy()

for (const [what, run, want] of behaviours) {
  let got
  try {
    got = run()
  } catch (e) {
    got = `error: ${e && e.message}`
  }
  if (got !== want) failed.push(`behaviour "${what}": got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
}

const stale = readdirSync(expectedDir).filter((n) => n.endsWith('.md') && !names.includes(n))
await crepe.destroy()
if (failed.length) console.error(`editor failed on:\n  ${failed.join('\n  ')}`)
if (check) {
  if (differ.length || stale.length) {
    console.error(
      `parity: ${differ.length} expected output(s) differ from the shipped editor, ${stale.length} stale:\n  ` +
        [...differ, ...stale].join('\n  ') +
        '\nregenerate with `node web/scripts/parity.mjs` and commit tests/markdown/parity/expected',
    )
    process.exit(1)
  }
  console.log(`parity: ${names.length} expected outputs match the shipped editor`)
} else {
  console.log(`parity: wrote ${names.length} expected outputs (${stale.length} stale file(s) left: ${stale.join(', ')})`)
}
process.exit(failed.length ? 1 : 0)
