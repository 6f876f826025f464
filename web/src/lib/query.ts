/**
 * Server state: one small helper (house style). `useQuery(key, fetcher)` loads, caches by key
 * for the page's lifetime, and re-renders everyone using the key when `invalidate(prefix)` is
 * called after a write. No global store beyond this cache.
 */
import { useLayoutEffect, useRef, useState } from 'preact/hooks'
import { ApiError } from '../api/client'

interface Entry {
  data?: unknown
  error?: ApiError
  promise?: Promise<void>
  fetcher?: () => Promise<unknown>
  /** Invalidated while a load was in flight: that load's answer may predate the write. */
  again?: boolean
  listeners: Set<() => void>
}

const cache = new Map<string, Entry>()

function entry(key: string): Entry {
  let e = cache.get(key)
  if (!e) {
    e = { listeners: new Set() }
    cache.set(key, e)
  }
  return e
}

function load(key: string, fetcher: () => Promise<unknown>): void {
  const e = entry(key)
  if (e.promise) {
    // A load already in flight may have been answered before the write that asked for this
    // one; drop its answer and fetch again when it lands, or a deleted item can linger.
    e.again = true
    return
  }
  e.promise = fetcher()
    .then((data) => {
      if (e.again) return
      e.data = data
      e.error = undefined
    })
    .catch((err: unknown) => {
      if (e.again) return
      e.error = err instanceof ApiError ? err : new ApiError(0, { error: 'NETWORK', detail: String(err) })
    })
    .finally(() => {
      e.promise = undefined
      if (e.again) {
        e.again = false
        load(key, e.fetcher ?? fetcher)
        return
      }
      e.listeners.forEach((l) => l())
    })
}

export interface Query<T> {
  data: T | undefined
  error: ApiError | undefined
  loading: boolean
  reload: () => void
}

export function useQuery<T>(key: string | null, fetcher: () => Promise<T>): Query<T> {
  const [, setTick] = useState(0)
  // what this render showed: an answer landing between the render and the subscription below
  // (Preact subscribes after paint; a prefetch may answer first) notified no one
  const shown = useRef<[unknown, unknown]>([undefined, undefined])
  useLayoutEffect(() => {
    if (key === null) return
    const e = entry(key)
    const l = () => setTick((n) => n + 1)
    e.listeners.add(l)
    if (e.data !== shown.current[0] || e.error !== shown.current[1]) l()
    // a load already in flight (a prefetch, another user of the key) notifies us when it lands
    else if (e.data === undefined && e.error === undefined && !e.promise) load(key, fetcher)
    return () => {
      e.listeners.delete(l)
    }
  }, [key])
  if (key === null) return { data: undefined, error: undefined, loading: false, reload: () => {} }
  const e = entry(key)
  e.fetcher = fetcher
  shown.current = [e.data, e.error]
  return {
    data: e.data as T | undefined,
    error: e.error,
    loading: e.data === undefined && e.error === undefined,
    reload: () => load(key, fetcher),
  }
}

/**
 * Start loading `key` before any component asks for it (the entry script does this for the
 * page it is about to render, so the request runs while the app renders). The page's own
 * `useQuery(key, ...)` then takes the answer instead of asking again. No-op if loaded/loading.
 */
export function prefetch(key: string, fetcher: () => Promise<unknown>): void {
  const e = entry(key)
  if (e.data !== undefined || e.error !== undefined || e.promise) return
  e.fetcher = fetcher
  load(key, fetcher)
}

/** Settles (never rejects) once the load of `key` in flight, if any, has landed. */
export function settled(key: string): Promise<void> {
  return cache.get(key)?.promise ?? Promise.resolve()
}

/** Refetch every cached key starting with `prefix` that someone is showing; drop the others. */
export function invalidate(prefix: string): void {
  for (const [key, e] of cache) {
    if (!key.startsWith(prefix)) continue
    if (e.listeners.size === 0) {
      cache.delete(key)
      continue
    }
    // keep showing the old data until the fresh load lands (no flicker)
    if (e.fetcher) load(key, e.fetcher)
  }
}

/** Put a value the caller already has (e.g. a write's response) into the cache. */
export function setQueryData(key: string, data: unknown): void {
  const e = entry(key)
  e.data = data
  e.error = undefined
  e.listeners.forEach((l) => l())
}
