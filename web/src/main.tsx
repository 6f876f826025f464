import { render } from 'preact'
import { App } from './app'
import { match } from './lib/router'
import { refreshSession } from './lib/session'
import { prefetchDocumentPage } from './pages/Document'
import './styles.css'

// The Editor chunk imports this entry for Vite's preload helper; a page without #app (the
// bench's bare editor page) loads it without starting the app.
const root = document.getElementById('app')
if (root) {
  // Start what the first page needs before rendering it, so the requests run while the app
  // renders (on the document page the server's preload hints have already sent them: these
  // calls take those answers; docs/web.md#the-document-page).
  void refreshSession()
  const route = match(location.pathname, location.search)
  if (route.name === 'document') prefetchDocumentPage(route)
  render(<App />, root)
}
