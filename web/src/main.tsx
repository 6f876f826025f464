import { render } from 'preact'
import { App } from './app'
import { styleNonce } from './lib/nonce'
import { match } from './lib/router'
import { refreshSession, refreshSessionAfter } from './lib/session'
import { prefetchDocumentPage } from './pages/Document'
import './styles.css'

// The Editor chunk imports this entry for Vite's preload helper; a page without #app (the
// bench's bare editor page) loads it without starting the app.
const root = document.getElementById('app')
// taken off the page before any dynamic import() can copy it onto a link (lib/nonce.ts)
styleNonce()
if (root) {
  // Start what the first page needs before rendering it, so the requests run while the app
  // renders. On the document page the server's preload hint has already sent the document's
  // read (this call takes its answer) and the session follows it (docs/web.md#build-and-serving).
  const route = match(location.pathname, location.search)
  if (route.name === 'document') void refreshSessionAfter(prefetchDocumentPage(route))
  else void refreshSession()
  render(<App />, root)
}
