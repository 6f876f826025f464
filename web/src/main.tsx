import { render } from 'preact'
import { App } from './app'
import './styles.css'

// The Editor chunk imports this entry for Vite's preload helper; a page without #app (the
// bench's bare editor page) loads it without starting the app.
const root = document.getElementById('app')
if (root) render(<App />, root)
