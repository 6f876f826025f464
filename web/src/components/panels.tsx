/** Dialogs of the document page: version history, share links and collaborators (docs/permissions.md). */
import { useState } from 'preact/hooks'
import { api, type ObjectType, type S } from '../api/client'
import { t } from '../lib/i18n'
import { invalidate, useQuery } from '../lib/query'
import { Dialog, ErrorNote, Field, Loading } from './ui'

export function HistoryDialog(props: { doc: S['DocumentOut']; canRestore: boolean; onClose: () => void; onRestored: () => void }) {
  const versions = useQuery(`versions:${props.doc.id}:${props.doc.current_version_id}`, () => api.versions(props.doc.id))
  const [shown, setShown] = useState<S['VersionDetail'] | null>(null)
  const [error, setError] = useState<unknown>(null)
  return (
    <Dialog title={t('history')} onClose={props.onClose} wide>
      {versions.loading ? <Loading /> : null}
      <ErrorNote error={versions.error ?? error} />
      {versions.data && versions.data.items.length === 0 ? <p>{t('historyEmpty')}</p> : null}
      <div class="history">
        <ul class="list">
          {versions.data?.items.map((v) => (
            <li key={v.id}>
              <span>{t('versionLabel', { no: v.version_no })}</span> <span class="muted">{new Date(v.created_at).toLocaleString()}</span>{' '}
              <button type="button" onClick={() => api.version(props.doc.id, v.id).then(setShown).catch(setError)}>
                {t('view')}
              </button>
              {props.canRestore && v.id !== props.doc.current_version_id ? (
                <button
                  type="button"
                  onClick={() =>
                    api
                      .restoreVersion(props.doc.id, v.id)
                      .then(() => {
                        invalidate(`versions:${props.doc.id}`)
                        props.onRestored()
                      })
                      .catch(setError)
                  }
                >
                  {t('restore')}
                </button>
              ) : null}
            </li>
          ))}
        </ul>
        {shown ? (
          <section aria-label={t('versionLabel', { no: shown.version_no })}>
            <h3>{shown.title}</h3>
            <pre>{shown.markdown}</pre>
          </section>
        ) : null}
      </div>
      <div class="actions">
        <button type="button" onClick={props.onClose}>
          {t('close')}
        </button>
      </div>
    </Dialog>
  )
}

export function ShareDialog(props: { objectType: ObjectType; objectId: string; onClose: () => void }) {
  const key = `share:${props.objectType}:${props.objectId}`
  const links = useQuery(`${key}:links`, () => api.shareLinks(props.objectType, props.objectId))
  const collaborators = useQuery(`${key}:collaborators`, () => api.collaborators(props.objectType, props.objectId))
  const [password, setPassword] = useState('')
  const [expires, setExpires] = useState('')
  const [membersOnly, setMembersOnly] = useState(false)
  const [created, setCreated] = useState<S['CreatedShareLinkOut'] | null>(null)
  const [copied, setCopied] = useState(false)
  const [error, setError] = useState<unknown>(null)
  const url = created ? `${location.origin}/share/${created.token}` : ''
  return (
    <Dialog title={t('share')} onClose={props.onClose} wide>
      <section aria-labelledby="links-h">
        <h3 id="links-h">{t('shareLinks')}</h3>
        {links.loading ? <Loading /> : null}
        {links.data && links.data.items.length === 0 ? <p class="muted">{t('noShareLinks')}</p> : null}
        <ul class="list">
          {links.data?.items.map((l) => (
            <li key={l.id}>
              <span>{new Date(l.created_at).toLocaleString()}</span>{' '}
              {l.has_password ? <span class="tag">{t('linkHasPassword')}</span> : null}
              {l.expires_at ? <span class="tag">{t('linkExpiresAt', { date: new Date(l.expires_at).toLocaleString() })}</span> : null}
              {l.revoked_at ? (
                <span class="tag">{t('linkClosed')}</span>
              ) : (
                <button type="button" onClick={() => api.revokeShareLink(l.id).then(() => invalidate(key)).catch(setError)}>
                  {t('closeLink')}
                </button>
              )}
            </li>
          ))}
        </ul>
        <form
          onSubmit={(e) => {
            e.preventDefault()
            setError(null)
            api
              .createShareLink(props.objectType, props.objectId, {
                permission: 'view',
                require_login: false,
                password: password || null,
                restrict_to_workspace_members: membersOnly,
                expires_at: expires ? new Date(expires).toISOString() : null,
              })
              .then((c) => {
                setCreated(c)
                setCopied(false)
                invalidate(key)
              })
              .catch(setError)
          }}
        >
          <Field label={t('linkPassword')} name="link-password" type="password" value={password} onInput={setPassword} autoComplete="new-password" />
          <Field label={t('linkExpires')} name="link-expires" type="datetime-local" value={expires} onInput={setExpires} />
          <div class="field check">
            <input id="link-members" type="checkbox" checked={membersOnly} onChange={(e) => setMembersOnly((e.target as HTMLInputElement).checked)} />
            <label for="link-members">{t('linkMembersOnly')}</label>
          </div>
          <button type="submit" class="primary">
            {t('createShareLink')}
          </button>
        </form>
        {created ? (
          <p role="status">
            {t('linkCreated')}{' '}
            <input readOnly aria-label={t('shareLinks')} value={url} class="url" />{' '}
            <button
              type="button"
              onClick={() => {
                void navigator.clipboard?.writeText(url).then(() => setCopied(true))
              }}
            >
              {copied ? t('copied') : t('copyUrl')}
            </button>
          </p>
        ) : null}
      </section>
      <section aria-labelledby="collab-h">
        <h3 id="collab-h">{t('collaborators')}</h3>
        {collaborators.data && collaborators.data.items.length === 0 ? <p class="muted">{t('noCollaborators')}</p> : null}
        <ul class="list">
          {collaborators.data?.items.map((c) => (
            <li key={c.id}>
              {String((c as Record<string, unknown>).subject_name ?? c.subject_id)} <span class="muted">{c.role}</span>
            </li>
          ))}
        </ul>
      </section>
      <ErrorNote error={error ?? links.error} />
      <div class="actions">
        <button type="button" onClick={props.onClose}>
          {t('close')}
        </button>
      </div>
    </Dialog>
  )
}
