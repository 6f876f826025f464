/**
 * Who is signed in: `GET /api/auth/me` once, then kept here (the one piece of state distant
 * pages share: top bar, home, invitation page). Also owns the CSRF token handed to the client.
 */
import { useLayoutEffect, useRef, useState } from 'preact/hooks'
import { api, ApiError, loadingCsrf, setCsrfToken, type S } from '../api/client'
import { invalidate, useQuery, type Query } from './query'

export type SessionState = { status: 'loading' } | { status: 'anonymous' } | { status: 'signed-in'; me: S['MeOut'] }

let state: SessionState = { status: 'loading' }
const listeners = new Set<() => void>()
let loading: Promise<void> | null = null

function set(s: SessionState): void {
  state = s
  listeners.forEach((l) => l())
}

export function refreshSession(): Promise<void> {
  loading = api
    .me()
    .then((me) => {
      setCsrfToken(me.csrf_token)
      set({ status: 'signed-in', me })
    })
    .catch((e: unknown) => {
      if (e instanceof ApiError && e.status === 401) {
        setCsrfToken(null)
        set({ status: 'anonymous' })
      } else {
        set({ status: 'anonymous' })
      }
    })
  loadingCsrf(loading)
  return loading
}

/**
 * Load the session once `first` has settled, not at once: the document page reads its document
 * first (main.tsx), since three reads started together all answer about as late as the slowest
 * on a small appliance. Pages render meanwhile, as while any session load is in flight.
 */
export function refreshSessionAfter(first: Promise<unknown>): Promise<void> {
  loading = first.then(
    () => refreshSession(),
    () => refreshSession(),
  )
  loadingCsrf(loading)
  return loading
}

export async function signIn(email: string, password: string): Promise<void> {
  const r = await api.login({ email, password })
  setCsrfToken(r.csrf_token)
  await refreshSession()
  invalidate('') // nothing loaded as someone else (or as nobody) survives a sign-in
}

export async function signOut(): Promise<void> {
  try {
    await api.logout()
  } finally {
    setCsrfToken(null)
    invalidate('')
    set({ status: 'anonymous' })
  }
}

export function useSession(): SessionState {
  const [, setTick] = useState(0)
  const shown = useRef(state) // as in useQuery: a change before the subscription notified no one
  shown.current = state
  useLayoutEffect(() => {
    const l = () => setTick((n) => n + 1)
    listeners.add(l)
    if (state !== shown.current) l()
    else if (state.status === 'loading' && !loading) void refreshSession()
    return () => {
      listeners.delete(l)
    }
  }, [])
  return state
}

/**
 * The workspace of a knowledge base, for a breadcrumb: fetched only when the signed-in user can
 * open it, i.e. is one of its members (``me.workspaces``: being an administrator grants no
 * content access, docs/permissions.md#administrators). Someone who reads the knowledge base as its
 * collaborator, or because it is public, is no member of its workspace: asking would only get a
 * 404 (a console error on every page of that knowledge base).
 */
export function useWorkspaceOf(kb: { workspace_id: string } | undefined): Query<S['WorkspaceOut']> {
  const s = useSession()
  const id = kb?.workspace_id
  const me = s.status === 'signed-in' ? s.me : null
  const may = !!id && !!me && me.workspaces.some((w) => w.id === id)
  return useQuery(may ? `workspace:${id}` : null, () => api.workspace(id!))
}
