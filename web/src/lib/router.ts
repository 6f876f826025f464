/**
 * Routes -> pages (docs/web.md). History-API routing with one guard hook: a page with unsaved
 * changes registers `setLeaveGuard`, and every in-app navigation asks it first (the browser's
 * own `beforeunload` covers reloads and closing the tab).
 */
import { useEffect, useState } from 'preact/hooks'

export interface Route {
  name: string
  params: Record<string, string>
  query: URLSearchParams
}

const PATTERNS: [string, RegExp][] = [
  ['login', /^\/login$/],
  ['register', /^\/register$/],
  ['verify-email', /^\/verify-email$/],
  ['reset-password', /^\/reset-password$/],
  ['invitation', /^\/invitations\/(?<token>[^/]+)$/],
  ['share-doc', /^\/share\/(?<token>[^/]+)\/docs\/(?<docId>[^/]+)$/],
  ['share', /^\/share\/(?<token>[^/]+)$/],
  ['home', /^\/app\/?$/],
  ['workspaces', /^\/app\/workspaces\/?$/],
  ['workspace', /^\/app\/workspaces\/(?<workspaceId>[^/]+)$/],
  ['search', /^\/app\/search$/],
  ['account', /^\/app\/account$/],
  ['account-apps', /^\/app\/account\/apps$/],
  ['account-entities', /^\/app\/account\/entities$/],
  ['kb-settings', /^\/app\/kb\/(?<kbId>[^/]+)\/settings$/],
  ['workspace-settings', /^\/app\/workspaces\/(?<workspaceId>[^/]+)\/settings$/],
  ['admin', /^\/admin(?:\/(?<tab>[^/]+|milvus\/rebuild-jobs))?\/?$/],
  ['document', /^\/app\/kb\/(?<kbId>[^/]+)\/docs\/(?<docId>[^/]+)$/],
  ['kb', /^\/app\/kb\/(?<kbId>[^/]+)$/],
  ['root', /^\/$/],
]

export function match(pathname: string, search: string): Route {
  for (const [name, re] of PATTERNS) {
    const m = re.exec(pathname)
    if (m) {
      const params: Record<string, string> = {}
      for (const [k, v] of Object.entries(m.groups ?? {})) params[k] = decodeURIComponent(v)
      return { name, params, query: new URLSearchParams(search) }
    }
  }
  return { name: 'not-found', params: {}, query: new URLSearchParams(search) }
}

type Listener = () => void
const listeners = new Set<Listener>()
let leaveGuard: (() => boolean) | null = null

/** A page with unsaved work: return true to allow leaving (e.g. after `confirm`). */
export function setLeaveGuard(guard: (() => boolean) | null): void {
  leaveGuard = guard
}

// the address shown now: where Back or Forward came from, to go back to when the guard says stay
let here = location.href

export function navigate(url: string, opts: { replace?: boolean } = {}): void {
  if (leaveGuard && !leaveGuard()) return
  if (opts.replace) history.replaceState(null, '', url)
  else history.pushState(null, '', url)
  here = location.href
  listeners.forEach((l) => l())
}

// Back and Forward ask the same question as a link: the browser has already moved, so staying
// puts the address back. A move within the page (a #fragment) is not leaving it.
window.addEventListener('popstate', () => {
  const from = new URL(here)
  const leaving = from.pathname !== location.pathname || from.search !== location.search
  if (leaving && leaveGuard && !leaveGuard()) {
    history.pushState(null, '', here)
    return
  }
  here = location.href
  listeners.forEach((l) => l())
})

export function useRoute(): Route {
  const [, setTick] = useState(0)
  useEffect(() => {
    const l = () => setTick((n) => n + 1)
    listeners.add(l)
    return () => {
      listeners.delete(l)
    }
  }, [])
  return match(location.pathname, location.search)
}

/** Same-origin link clicks go through `navigate` (left click without modifier keys). */
export function onLinkClick(e: MouseEvent): void {
  const a = (e.target as Element | null)?.closest?.('a')
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return
  if (a.target && a.target !== '_self') return
  const href = a.getAttribute('href')
  if (!href || !href.startsWith('/') || href.startsWith('//') || href.startsWith('/api/')) return
  e.preventDefault()
  navigate(href)
}

export const paths = {
  home: () => '/app',
  login: (next?: string) => '/login' + (next ? `?next=${encodeURIComponent(next)}` : ''),
  workspace: (id: string) => `/app/workspaces/${id}`,
  kb: (id: string) => `/app/kb/${id}`,
  doc: (kbId: string, docId: string) => `/app/kb/${kbId}/docs/${docId}`,
  account: () => '/app/account',
  accountApps: () => '/app/account/apps',
  accountEntities: () => '/app/account/entities',
  kbSettings: (id: string) => `/app/kb/${id}/settings`,
  workspaceSettings: (id: string) => `/app/workspaces/${id}/settings`,
  admin: (tab?: string) => '/admin' + (tab ? `/${tab}` : ''),
  search: (q?: string) => '/app/search' + (q ? `?q=${encodeURIComponent(q)}` : ''),
  share: (token: string) => `/share/${token}`,
  shareDoc: (token: string, docId: string) => `/share/${token}/docs/${docId}`,
}
