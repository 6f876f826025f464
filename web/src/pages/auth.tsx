/** Public account pages: /login, /register, /verify-email, /reset-password (docs/accounts.md). */
import { useEffect, useState } from 'preact/hooks'
import { api, type S } from '../api/client'
import { ErrorNote, Field, PublicFrame } from '../components/ui'
import { t } from '../lib/i18n'
import { navigate, paths, type Route } from '../lib/router'
import { signIn } from '../lib/session'

/** Only same-app paths are followed after sign-in (no open redirect). */
function safeNext(next: string | null): string {
  return next && next.startsWith('/') && !next.startsWith('//') ? next : paths.home()
}

export function LoginPage({ route }: { route: Route }) {
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const [error, setError] = useState<unknown>(null)
  const [busy, setBusy] = useState(false)
  const next = route.query.get('next')
  return (
    <PublicFrame title={t('signIn')}>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          setBusy(true)
          setError(null)
          signIn(email, password)
            .then(() => navigate(safeNext(next), { replace: true }))
            .catch(setError)
            .finally(() => setBusy(false))
        }}
      >
        <Field label={t('email')} name="email" type="email" value={email} onInput={setEmail} required autoComplete="username" />
        <Field label={t('password')} name="password" type="password" value={password} onInput={setPassword} required autoComplete="current-password" />
        <ErrorNote error={error} />
        <button type="submit" class="primary" disabled={busy}>
          {t('signIn')}
        </button>
      </form>
      <p>
        <a href="/reset-password">{t('forgotPassword')}</a>
      </p>
      <p>
        {t('noAccount')} <a href={'/register' + (next ? `?next=${encodeURIComponent(next)}` : '')}>{t('register')}</a>
      </p>
    </PublicFrame>
  )
}

export function RegisterPage({ route }: { route: Route }) {
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const [name, setName] = useState('')
  const [error, setError] = useState<unknown>(null)
  const [done, setDone] = useState<S['RegisterOut'] | null>(null)
  const next = route.query.get('next')
  if (done) {
    return (
      <PublicFrame title={t('register')}>
        <p role="status">
          {done.verification_required
            ? done.mail_to_outbox
              ? t('verifyInOutbox', { email: done.user.email })
              : t('checkMailbox', { email: done.user.email })
            : done.user.status === 'pending_activation'
              ? t('awaitingActivation')
              : t('accountCreated')}
        </p>
        {done.verification_required && done.mail_to_outbox ? (
          // no mail server: the operator confirms the account from the shell (docs/accounts.md#mail)
          <pre>
            <code>openkb user activate {done.user.email}</code>
          </pre>
        ) : null}
        <p>
          <a href={paths.login(next ?? undefined)}>{t('continueToSignIn')}</a>
        </p>
      </PublicFrame>
    )
  }
  return (
    <PublicFrame title={t('register')}>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          setError(null)
          api
            .register({ email, password, display_name: name || null })
            .then(setDone)
            .catch(setError)
        }}
      >
        <Field label={t('displayName')} name="display_name" value={name} onInput={setName} autoComplete="name" />
        <Field label={t('email')} name="email" type="email" value={email} onInput={setEmail} required autoComplete="email" />
        <Field label={t('password')} name="password" type="password" value={password} onInput={setPassword} required minLength={8} autoComplete="new-password" hint={t('passwordHint')} />
        <ErrorNote error={error} />
        <button type="submit" class="primary">
          {t('register')}
        </button>
      </form>
      <p>
        {t('haveAccount')} <a href={paths.login(next ?? undefined)}>{t('signIn')}</a>
      </p>
    </PublicFrame>
  )
}

/** Where an invitation accepted with the verification leads after sign-in: the workspace or
 * knowledge base it opened (a document's page needs its knowledge base, which only a signed-in
 * request can look up: home, where search finds it). */
function invitedTo(invitation: S['VerifyOut']['invitation']): string | undefined {
  const inv = invitation as { status?: string; object_type?: string; object_id?: string; knowledge_base_id?: string } | null | undefined
  if (inv?.status !== 'accepted' || !inv.object_id) return undefined
  if (inv.object_type === 'workspace') return paths.workspace(inv.object_id)
  if (inv.object_type === 'knowledge_base') return paths.kb(inv.object_id)
  if (inv.object_type === 'document' && inv.knowledge_base_id) return paths.doc(inv.knowledge_base_id, inv.object_id)
  return undefined
}

export function VerifyEmailPage({ route }: { route: Route }) {
  const token = route.query.get('token') ?? ''
  const invitation = route.query.get('invitation')
  const [result, setResult] = useState<S['VerifyOut'] | null>(null)
  const [error, setError] = useState<unknown>(null)
  useEffect(() => {
    // A POST, not a GET on page load by the server: mail scanners that prefetch links don't
    // consume the token (only a browser running this page does). A link cut short (no token)
    // is not sent: the server would only answer with a form error about a field.
    if (token) api.verifyEmail({ token, invitation_token: invitation || null }).then(setResult).catch(setError)
  }, [token])
  return (
    // the title names the page's purpose, not its outcome: the outcome is the status line
    <PublicFrame title={t('verifyEmailTitle')}>
      {!token ? <p role="alert">{t('verifyLinkIncomplete')}</p> : null}
      {token && !result && !error ? <p aria-busy="true">{t('verifyingEmail')}</p> : null}
      <ErrorNote error={error} />
      {result ? (
        <>
          <p role="status">{result.user.status === 'active' ? t('emailVerified') : t('awaitingActivation')}</p>
          <p>
            <a href={paths.login(invitedTo(result.invitation))}>{t('continueToSignIn')}</a>
          </p>
        </>
      ) : null}
      {!token || error ? (
        // how to get a working link: signing up again with the same address mails a fresh one
        // while the account waits for confirmation (docs/accounts.md#registration)
        <p>
          {t('verifyLinkHelp')} <a href="/register">{t('register')}</a> · <a href={paths.login()}>{t('signIn')}</a>
        </p>
      ) : null}
    </PublicFrame>
  )
}

export function ResetPasswordPage({ route }: { route: Route }) {
  const token = route.query.get('token')
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const [error, setError] = useState<unknown>(null)
  // what the request answered (its mail_to_outbox), or true once a new password is set
  const [done, setDone] = useState<{ mail_to_outbox?: boolean } | null>(null)
  if (done) {
    return (
      <PublicFrame title={t('resetTitle')}>
        <p role="status">{token ? t('resetDone') : done.mail_to_outbox ? t('resetInOutbox') : t('resetSent')}</p>
        <p>
          <a href={paths.login()}>{t('continueToSignIn')}</a>
        </p>
      </PublicFrame>
    )
  }
  return (
    <PublicFrame title={t('resetTitle')}>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          setError(null)
          const call = token ? api.resetConfirm({ token, password }) : api.resetRequest({ email })
          call.then((r) => setDone(token ? {} : (r as S['ResetRequestOut']))).catch(setError)
        }}
      >
        {token ? (
          <Field label={t('newPassword')} name="password" type="password" value={password} onInput={setPassword} required minLength={8} autoComplete="new-password" hint={t('passwordHint')} />
        ) : (
          <Field label={t('email')} name="email" type="email" value={email} onInput={setEmail} required autoComplete="email" />
        )}
        <ErrorNote error={error} />
        <button type="submit" class="primary">
          {token ? t('setPassword') : t('resetSend')}
        </button>
      </form>
    </PublicFrame>
  )
}
