// The bundle is written into the Python package (server/web/dist, committed) so `pip install`
// and `openkb up` need no Node; CI rebuilds it and fails if the committed files differ, so the
// output must be deterministic (content-hashed names, no timestamps, no absolute paths).
import { defineConfig } from 'vite'

export default defineConfig({
  base: '/',
  root: '.',
  publicDir: false,
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  // The server replaces this placeholder with a fresh nonce per index.html response and names it
  // in the CSP's style-src (server/web/__init__.py); Vite writes it into a
  // <meta property="csp-nonce"> and on the <link>/<script> tags it emits or preloads.
  html: { cspNonce: 'OPENKB_CSP_NONCE' },
  build: {
    outDir: '../server/web/dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    // Never inline fonts or images as data: URLs, so the CSP can stay `font-src 'self'`.
    assetsInlineLimit: 0,
    sourcemap: false,
    chunkSizeWarningLimit: 4000,
    modulePreload: { polyfill: false },
  },
})
