// The page that draws Mermaid diagrams in a hidden frame of the app (diagram.html,
// src/diagram-frame.ts), built after the app into the same folder: a build of its own, so Mermaid's
// chunks never share a chunk with the app's pages and the app's entry stays as it was (no file
// of the diagram page is preloaded by a page without diagrams).
import { defineConfig, mergeConfig } from 'vite'

import app from './vite.config'

export default mergeConfig(
  app,
  defineConfig({
    build: { emptyOutDir: false, rollupOptions: { input: { diagram: 'diagram.html' } } },
  }),
)
