/** Small shared pieces: error notes, labelled fields, modal dialogs, the top bar. */
import type { ComponentChildren, JSX } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { ApiError } from '../api/client'
import { errorText, LANGS, lang, setLang, t, type Lang } from '../lib/i18n'
import { navigate, paths } from '../lib/router'
import { signOut, useSession } from '../lib/session'

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null
  const text = error instanceof ApiError ? errorText(error.code, error.detail) : errorText('NETWORK', String(error))
  return (
    <p class="error" role="alert">
      {text}
    </p>
  )
}

export function Field(props: {
  label: string
  name: string
  type?: 'text' | 'email' | 'password' | 'datetime-local' | 'search'
  value: string
  onInput: (v: string) => void
  required?: boolean
  autoComplete?: string
  minLength?: number
  /** A line under the field saying what it accepts (read out with it: aria-describedby). */
  hint?: string
}) {
  const id = `f-${props.name}`
  // Preact's input typings narrow by `type`; a variable type needs one cast
  const inputAttrs = {
    id,
    name: props.name,
    type: props.type ?? 'text',
    value: props.value,
    required: props.required,
    minLength: props.minLength,
    autoComplete: props.autoComplete,
    'aria-describedby': props.hint ? `${id}-hint` : undefined,
    onInput: (e: Event) => props.onInput((e.target as HTMLInputElement).value),
  } as unknown as JSX.IntrinsicElements['input']
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <input {...inputAttrs} />
      {props.hint ? (
        <p id={`${id}-hint`} class="muted small field-hint">
          {props.hint}
        </p>
      ) : null}
    </div>
  )
}

/** A modal `<dialog>`: focus moves in, Escape closes, the rest of the page is inert. */
export function Dialog(props: { title: string; onClose: () => void; children: ComponentChildren; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null)
  useEffect(() => {
    const d = ref.current!
    if (!d.open) d.showModal()
    const onCancel = (e: Event) => {
      e.preventDefault()
      props.onClose()
    }
    d.addEventListener('cancel', onCancel)
    return () => {
      d.removeEventListener('cancel', onCancel)
      if (d.open) d.close()
    }
  }, [])
  return (
    <dialog ref={ref} class={props.wide ? 'dialog wide' : 'dialog'} aria-labelledby="dialog-title">
      <h2 id="dialog-title">{props.title}</h2>
      {props.children}
    </dialog>
  )
}

export function LanguageSwitch() {
  return (
    <label class="lang">
      <span class="sr-only">{t('language')}</span>
      <select aria-label={t('language')} value={lang()} onChange={(e) => setLang((e.target as HTMLSelectElement).value as Lang)}>
        {LANGS.map((l) => (
          <option value={l.code} key={l.code}>
            {l.label}
          </option>
        ))}
      </select>
    </label>
  )
}

/** A page that could not be shown (unknown or unreadable: 404 either way): the error and one way on. */
export function ErrorPage(props: { error: unknown; back: { href: string; label: string } }) {
  return (
    <>
      <TopBar />
      <main id="main" class="page">
        <ErrorNote error={props.error} />
        <p>
          <a href={props.back.href}>{props.back.label}</a>
        </p>
      </main>
    </>
  )
}

/**
 * The tree's button on a narrow screen, where the sidebar is hidden (styles.css): it opens the
 * tree over the page, so a phone can reach every page of a knowledge base, not only what search
 * finds. Hidden on wider screens, where the tree is always there.
 */
export function TreeToggle(props: { open: boolean; onToggle: () => void }) {
  return (
    <button type="button" class="tree-toggle" aria-expanded={props.open} onClick={props.onToggle}>
      {t('tree')}
    </button>
  )
}

/** A button that copies ``text`` and says so until the text changes (a secret shown once, a
 * share link, an MCP address or client configuration). */
export function CopyButton(props: { text: string; label?: string; name?: string }) {
  const [copied, setCopied] = useState<string | null>(null)
  return (
    <button
      type="button"
      aria-label={props.name ? `${props.label ?? t('copy')}: ${props.name}` : undefined}
      onClick={() => void navigator.clipboard?.writeText(props.text).then(() => setCopied(props.text))}
    >
      {copied === props.text ? t('copied') : (props.label ?? t('copy'))}
    </button>
  )
}

/** The browser tab's title, and so its history entries and bookmarks: the page's own title, then
 * the product's name (several documents open in tabs read apart). */
export function useTabTitle(title?: string | null): void {
  useEffect(() => {
    document.title = title ? `${title} · ${t('appName')}` : t('appName')
  }, [title])
}

/** ``useTabTitle`` where a hook cannot go (after a page's early returns). */
export function TabTitle(props: { title?: string | null }) {
  useTabTitle(props.title)
  return null
}

/** The app pages' top bar; ``title`` names the page in the browser's tab (``useTabTitle``). */
export function TopBar(props: { children?: ComponentChildren; title?: string | null }) {
  useTabTitle(props.title)
  const s = useSession()
  const [q, setQ] = useState('')
  return (
    <header class="topbar">
      <a class="brand" href={paths.home()}>
        {t('appName')}
      </a>
      <nav class="crumbs" aria-label={t('breadcrumb')}>
        {props.children}
      </nav>
      <form
        role="search"
        class="topsearch"
        onSubmit={(e) => {
          e.preventDefault()
          navigate(paths.search(q))
        }}
      >
        <input
          type="search"
          aria-label={t('search')}
          placeholder={t('searchPlaceholder')}
          value={q}
          onInput={(e) => setQ((e.target as HTMLInputElement).value)}
        />
      </form>
      <LanguageSwitch />
      {s.status === 'signed-in' ? (
        <span class="user">
          <a class="user-name" href={paths.account()} title={t('signedInAs', { name: s.me.user.email })}>
            {s.me.user.display_name}
          </a>
          {s.me.tenant_roles.some((r) => r.role === 'system_admin' || (r.role === 'tenant_admin' && r.tenant_id === s.me.tenant_id)) ? (
            <a href={paths.admin()}>{t('adminConsole')}</a>
          ) : null}
          <button
            type="button"
            class="link-button"
            onClick={() => {
              void signOut().then(() => navigate(paths.login()))
            }}
          >
            {t('signOut')}
          </button>
        </span>
      ) : null}
    </header>
  )
}

export function PublicFrame(props: { title: string; children: ComponentChildren }) {
  useTabTitle(props.title)
  return (
    <div class="public">
      <div class="public-top">
        <span class="brand">{t('appName')}</span>
        <LanguageSwitch />
      </div>
      <main id="main" class="card">
        <h1>{props.title}</h1>
        {props.children}
      </main>
    </div>
  )
}

export function Loading() {
  return (
    <p class="muted" aria-busy="true">
      {t('loading')}
    </p>
  )
}
