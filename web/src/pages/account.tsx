/**
 * /app/account: the signed-in user's own account (docs/web.md#my-account): profile, password,
 * login sessions, personal access tokens, connected MCP clients (OAuth grants).
 *
 * Trap: a new token's secret is in the create response only. It is kept in this component's
 * state until the dialog closes and never put in the query cache, so it can't reappear.
 */
import { useState } from 'preact/hooks'
import { api, ApiError, type S } from '../api/client'
import { TimeZoneField } from '../components/forms'
import { CopyButton, Dialog, ErrorNote, Field, Loading, TopBar } from '../components/ui'
import { deviceName } from '../lib/device'
import { t, type MessageKey } from '../lib/i18n'
import { invalidate, useQuery } from '../lib/query'
import { paths } from '../lib/router'
import { refreshSession, useSession } from '../lib/session'

const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—')

function ProfileSection({ me }: { me: S['MeOut'] }) {
  const [name, setName] = useState(me.user.display_name)
  // the user's local day counts the apps' daily quotas (docs/apps.md#limits-and-quotas); empty = UTC
  const [zone, setZone] = useState(me.user.time_zone ?? '')
  const [saved, setSaved] = useState(false)
  const [error, setError] = useState<unknown>(null)
  // an unknown zone is a 422 VALIDATION_ERROR naming the field: shown under it, not at the top
  const zoneError = error instanceof ApiError && error.body.field === 'time_zone' ? error : null
  return (
    <section aria-labelledby="profile-h">
      <h2 id="profile-h">{t('profile')}</h2>
      <p>
        {t('email')}: {me.user.email}
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          setError(null)
          api
            .updateProfile({ display_name: name, time_zone: zone.trim() || null })
            .then(() => refreshSession())
            .then(() => setSaved(true))
            .catch(setError)
        }}
      >
        <Field label={t('displayName')} name="profile-name" value={name} onInput={(v) => (setName(v), setSaved(false))} required />
        <TimeZoneField
          id="f-profile-zone"
          name="profile-zone"
          label={t('timeZone')}
          help={t('timeZoneHelp')}
          value={zone}
          onInput={(v) => (setZone(v), setSaved(false))}
          error={zoneError ? zoneError.detail : null}
          useBrowser={(z) => t('timeZoneUseBrowser', { zone: z })}
        />
        <ErrorNote error={zoneError ? null : error} />
        <button type="submit" class="primary">
          {t('save')}
        </button>
        {saved ? <span role="status"> {t('saved')}</span> : null}
      </form>
    </section>
  )
}

function PasswordSection() {
  const [current, setCurrent] = useState('')
  const [next, setNext] = useState('')
  const [done, setDone] = useState<number | null>(null)
  const [error, setError] = useState<unknown>(null)
  return (
    <section aria-labelledby="password-h">
      <h2 id="password-h">{t('changePassword')}</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          setError(null)
          api
            .changePassword({ current_password: current, new_password: next })
            .then((r) => {
              setDone(r.sessions_revoked)
              setCurrent('')
              setNext('')
              invalidate('account:sessions')
            })
            .catch(setError)
        }}
      >
        <Field label={t('currentPassword')} name="current-password" type="password" value={current} onInput={setCurrent} autoComplete="current-password" required />
        <Field label={t('newPassword')} name="new-password" type="password" value={next} onInput={setNext} autoComplete="new-password" minLength={8} required hint={t('passwordHint')} />
        <ErrorNote error={error} />
        <button type="submit" class="primary">
          {t('changePassword')}
        </button>
        {done !== null ? <p role="status">{t('passwordChanged', { n: done })}</p> : null}
      </form>
    </section>
  )
}

function SessionsSection() {
  const sessions = useQuery('account:sessions', api.sessions)
  const [error, setError] = useState<unknown>(null)
  const reload = () => invalidate('account:sessions')
  return (
    <section aria-labelledby="sessions-h">
      <h2 id="sessions-h">{t('sessions')}</h2>
      {sessions.loading ? <Loading /> : null}
      <ErrorNote error={sessions.error ?? error} />
      <table class="grid" aria-labelledby="sessions-h">
        <thead>
          <tr>
            <th>{t('device')}</th>
            <th>{t('lastSeen')}</th>
            <th>{t('created')}</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {sessions.data?.items.map((s) => (
            <tr key={s.id}>
              <td title={s.user_agent ?? undefined}>
                {deviceName(s.user_agent) ?? '—'} <span class="muted">{s.ip ?? ''}</span>
                {s.current ? <strong> {t('thisSession')}</strong> : null}
              </td>
              <td>{when(s.last_seen_at)}</td>
              <td>{when(s.created_at)}</td>
              <td>
                {s.current ? null : (
                  <button type="button" onClick={() => api.revokeSession(s.id).then(reload).catch(setError)}>
                    {t('signOut')}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <button type="button" onClick={() => api.revokeOtherSessions().then(reload).catch(setError)}>
        {t('signOutOthers')}
      </button>
    </section>
  )
}

const SCOPES = ['kb:read', 'kb:search', 'doc:read', 'doc:write', 'kb:write', 'admin', 'facts:read'] as const // facts:read: never a default (docs/facts.md)
const EXPIRY_DAYS = [30, 90, 365, 0] as const

/** The scopes /mcp serves (docs/mcp.md#authorization): a token with none of them is refused
 * there, so the dialog offers no client configuration for it. */
const MCP_SCOPES = new Set(['kb:read', 'kb:search', 'doc:read', 'doc:write', 'facts:read'])

/** The MCP address, as the server builds it from APP_BASE_URL (what a client on another machine
 * must use), not this page's origin. */
function useMcpUrl(): string | undefined {
  return useQuery('mcp:resource', api.mcpResource).data?.resource
}

/** Where AI tools connect: the MCP address, which OAuth clients (Claude, ChatGPT, VS Code) need
 * alone; header-only clients add a personal access token (the configuration is shown with a new
 * token, the one moment its secret is known). */
function McpEndpoint() {
  const url = useMcpUrl()
  if (!url) return null
  return (
    <div class="mcp-endpoint">
      <label for="mcp-url">{t('mcpEndpoint')}</label>{' '}
      <input id="mcp-url" readOnly value={url} class="url" /> <CopyButton text={url} name={t('mcpEndpoint')} />
      <p class="muted">{t('mcpEndpointHelp')}</p>
    </div>
  )
}

/** Ready-to-paste configuration of the usual header-only MCP clients with a new token. Each is
 * the client's documented form for a remote (Streamable HTTP) server with a header. */
function McpClientConfig({ token }: { token: string }) {
  const url = useMcpUrl()
  if (!url) return null
  const auth = { Authorization: `Bearer ${token}` }
  const configs: [string, string][] = [
    ['Cursor (mcp.json)', JSON.stringify({ mcpServers: { openkb: { url, headers: auth } } }, null, 2)],
    ['VS Code (.vscode/mcp.json)', JSON.stringify({ servers: { openkb: { type: 'http', url, headers: auth } } }, null, 2)],
    ['Claude Code', `claude mcp add --transport http openkb ${url} --header "Authorization: Bearer ${token}"`],
  ]
  return (
    <details class="mcp-config">
      <summary>{t('mcpConfigTitle')}</summary>
      {configs.map(([name, text]) => (
        <div class="mcp-client" key={name}>
          {name} <CopyButton text={text} name={name} />
          <textarea readOnly aria-label={name} rows={Math.max(3, text.split('\n').length)} value={text} class="code" />
        </div>
      ))}
    </details>
  )
}

function NewTokenDialog({ onClose }: { onClose: () => void }) {
  const [name, setName] = useState('')
  const [scopes, setScopes] = useState<string[]>(['kb:read', 'kb:search', 'doc:read'])
  const [days, setDays] = useState<number>(90)
  const [created, setCreated] = useState<S['PatCreated'] | null>(null)
  const [error, setError] = useState<unknown>(null)
  return (
    <Dialog title={t('newToken')} onClose={onClose} wide={!!created}>
      {created ? (
        <>
          <p role="status">{t('tokenShownOnce')}</p>
          <input readOnly aria-label={t('tokenValue')} value={created.token} class="url" /> <CopyButton text={created.token} />
          {created.scopes.some((s) => MCP_SCOPES.has(s)) ? <McpClientConfig token={created.token} /> : null}
          <div class="actions">
            <button type="button" class="primary" onClick={onClose}>
              {t('done')}
            </button>
          </div>
        </>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault()
            setError(null)
            api
              .createToken({
                name,
                scopes: scopes as S['PatIn']['scopes'],
                expires_at: days ? new Date(Date.now() + days * 86400_000).toISOString() : null,
              })
              .then((c) => {
                setCreated(c)
                invalidate('account:tokens')
              })
              .catch(setError)
          }}
        >
          <Field label={t('tokenName')} name="token-name" value={name} onInput={setName} required />
          <fieldset>
            <legend>{t('scopes')}</legend>
            {SCOPES.map((s) => (
              <label class="check" key={s}>
                <input
                  type="checkbox"
                  checked={scopes.includes(s)}
                  onChange={(e) => setScopes((e.target as HTMLInputElement).checked ? [...scopes, s] : scopes.filter((x) => x !== s))}
                />{' '}
                {s} <span class="muted">{t(`scope_${s.replace(':', '_')}` as MessageKey)}</span>
              </label>
            ))}
          </fieldset>
          <div class="field">
            <label for="token-expiry">{t('expiry')}</label>
            <select id="token-expiry" value={String(days)} onChange={(e) => setDays(Number((e.target as HTMLSelectElement).value))}>
              {EXPIRY_DAYS.map((d) => (
                <option key={d} value={String(d)}>
                  {d ? t('inDays', { n: d }) : t('never')}
                </option>
              ))}
            </select>
          </div>
          <ErrorNote error={error} />
          <div class="actions">
            <button type="button" onClick={onClose}>
              {t('cancel')}
            </button>
            <button type="submit" class="primary">
              {t('create')}
            </button>
          </div>
        </form>
      )}
    </Dialog>
  )
}

function TokensSection() {
  const tokens = useQuery('account:tokens', api.tokens)
  const [open, setOpen] = useState(false)
  const [error, setError] = useState<unknown>(null)
  return (
    <section aria-labelledby="tokens-h">
      <h2 id="tokens-h">{t('accessTokens')}</h2>
      <p class="muted">{t('accessTokensHelp')}</p>
      <McpEndpoint />
      {tokens.loading ? <Loading /> : null}
      <ErrorNote error={tokens.error ?? error} />
      <table class="grid" aria-labelledby="tokens-h">
        <thead>
          <tr>
            <th>{t('tokenName')}</th>
            <th>{t('scopes')}</th>
            <th>{t('status')}</th>
            <th>{t('expires')}</th>
            <th>{t('lastUsed')}</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {tokens.data?.items.map((tk) => (
            <tr key={tk.id}>
              <td>{tk.name}</td>
              <td>{tk.scopes.join(' ')}</td>
              <td>{t(`tokenStatus_${tk.status}` as MessageKey)}</td>
              <td>{tk.expires_at ? when(tk.expires_at) : t('never')}</td>
              <td>{when(tk.last_used_at)}</td>
              <td>
                {tk.status === 'active' ? (
                  <button
                    type="button"
                    aria-label={t('revokeNamed', { name: tk.name })}
                    onClick={() => {
                      if (confirm(t('revokeTokenConfirm', { name: tk.name })))
                        api.revokeToken(tk.id).then(() => invalidate('account:tokens')).catch(setError)
                    }}
                  >
                    {t('revokeAction')}
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <button type="button" onClick={() => setOpen(true)}>
        {t('newToken')}
      </button>
      {open ? <NewTokenDialog onClose={() => setOpen(false)} /> : null}
    </section>
  )
}

function GrantsSection() {
  const grants = useQuery('account:grants', api.oauthGrants)
  const [error, setError] = useState<unknown>(null)
  return (
    <section aria-labelledby="grants-h">
      <h2 id="grants-h">{t('connectedApps')}</h2>
      {grants.loading ? <Loading /> : null}
      <ErrorNote error={grants.error ?? error} />
      {grants.data && grants.data.items.length === 0 ? <p class="muted">{t('noConnectedApps')}</p> : null}
      {grants.data && grants.data.items.length ? (
        <table class="grid" aria-labelledby="grants-h">
          <thead>
            <tr>
              <th>{t('client')}</th>
              <th>{t('scopes')}</th>
              <th>{t('created')}</th>
              <th>{t('lastUsed')}</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {grants.data.items.map((g) => (
              <tr key={g.id}>
                <td>
                  {g.client_name} <span class="muted">{g.client_id}</span>
                </td>
                <td>{g.scopes.join(' ')}</td>
                <td>{when(g.created_at)}</td>
                <td>{when(g.last_used_at)}</td>
                <td>
                  <button
                    type="button"
                    aria-label={t('revokeNamed', { name: g.client_name })}
                    onClick={() => api.revokeOauthGrant(g.id).then(() => invalidate('account:grants')).catch(setError)}
                  >
                    {t('revokeAction')}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  )
}

export function AccountPage() {
  const s = useSession()
  return (
    <>
      <TopBar title={t('myAccount')}>
        <span>{t('myAccount')}</span>
      </TopBar>
      <main id="main" class="page">
        <h1>{t('myAccount')}</h1>
        {s.status === 'signed-in' ? <ProfileSection me={s.me} /> : <Loading />}
        <PasswordSection />
        <SessionsSection />
        <TokensSection />
        <GrantsSection />
        <p>
          <a href={paths.accountApps()}>{t('apps_link')}</a>
        </p>
        <p>
          <a href={paths.accountEntities()}>{t('entities_title')}</a>
        </p>
      </main>
    </>
  )
}
