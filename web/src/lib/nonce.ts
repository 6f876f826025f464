/**
 * The page's style nonce (docs/web.md#content-security-policy): read once from Vite's
 * `<meta property="csp-nonce">`, then the tag is taken off the page.
 *
 * Why off the page: Vite's loader copies that meta's nonce onto every `modulepreload` and
 * stylesheet link it inserts for a dynamic `import()` (the editor chunk on a share page, the
 * code-block language chunks), and Chromium keeps a module's nonce with its compiled code: with a
 * fresh nonce per page, those modules were compiled again on every visit. Those links need no
 * nonce (`script-src` and `style-src` allow `'self'`); only inline `<style>` does (CodeMirror's,
 * through `EditorView.cspNonce`), and it gets this value.
 *
 * Read the `nonce` property, not the attribute: browsers hide the attribute's value once the page
 * is parsed.
 */
let nonce: string | undefined | null = null

export function styleNonce(): string | undefined {
  if (nonce === null) {
    const meta = document.querySelector<HTMLMetaElement>('meta[property=csp-nonce]')
    nonce = meta?.nonce || meta?.getAttribute('nonce') || undefined
    meta?.remove()
  }
  return nonce
}
