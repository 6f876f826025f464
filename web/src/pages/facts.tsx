/**
 * Facts and entities in the account area (docs/facts.md#the-users-page).
 *
 * - `AppFacts`, inside each installed app's card on /app/account/apps: the facts about you that
 *   the app's facts strings cover (core predicates by their names, the app's own with its
 *   description and "added by this app"), with your current values; you add, change and delete
 *   them here, and what you set is user-said (an app cannot overwrite it on a one-value
 *   predicate).
 * - `EntitiesPage` (/app/account/entities): your contacts, organisations and places with their
 *   identifiers; merge one into another (its refs keep working) or delete it.
 *
 * Trap: values are JSON; a text field edits strings only — other values are shown, and can be
 * deleted, but not edited here.
 */
import { useState } from 'preact/hooks'
import { request, type S } from '../api/client'
import { ErrorNote, Loading, TopBar } from '../components/ui'
import { lang, t } from '../lib/i18n'
import { invalidate, useQuery } from '../lib/query'
import { paths } from '../lib/router'

type Covered = S['CoveredPredicate']

const factsApi = {
  covered: (id: string) => request<S['CoveredList']>('GET', `/api/apps/v1/installations/${encodeURIComponent(id)}/facts`),
  put: (body: S['UserFactIn']) => request<S['UserPutOut']>('POST', '/api/apps/v1/facts', body),
  retract: (id: string) => request<unknown>('POST', `/api/apps/v1/facts/${encodeURIComponent(id)}/retract`),
  entities: () => request<S['UserEntityList']>('GET', '/api/apps/v1/entities'),
  merge: (id: string, mergedId: string) =>
    request<unknown>('POST', `/api/apps/v1/entities/${encodeURIComponent(id)}/merge`, { merged_id: mergedId }),
  remove: (id: string) => request<void>('DELETE', `/api/apps/v1/entities/${encodeURIComponent(id)}`),
}

const shown = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v))

function label(p: Covered): string {
  const l = lang()
  return p.names[l] || p.names.en || p.description || p.predicate
}

function PredicateRow({ p, onError }: { p: Covered; onError: (e: unknown) => void }) {
  const [draft, setDraft] = useState('')
  const done = () => invalidate('facts:')
  const id = `fact-${p.predicate.replace(/\W/g, '-')}`
  return (
    <li>
      <div>
        <strong id={id}>{label(p)}</strong> <code class="muted">{p.predicate}</code>
        {p.added_by_this_app ? <span class="badge"> {t('facts_addedByApp')}</span> : null}
      </div>
      {p.added_by_this_app && p.description ? <p class="muted">{p.description}</p> : null}
      <ul>
        {p.values.map((v) => (
          <li key={v.id}>
            {shown(v.value)} <span class="muted">({v.said_by === 'user' ? t('facts_saidByYou') : t('facts_saidByApp')})</span>{' '}
            <button
              type="button"
              aria-label={t('facts_deleteNamed', { name: `${label(p)}: ${shown(v.value)}` })}
              onClick={() => factsApi.retract(v.id).then(done).catch(onError)}
            >
              {t('facts_delete')}
            </button>
          </li>
        ))}
      </ul>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          if (!draft.trim()) return
          factsApi
            .put({ predicate: p.predicate, value: draft.trim() })
            .then(() => {
              setDraft('')
              done()
            })
            .catch(onError)
        }}
      >
        <input
          aria-labelledby={id}
          value={draft}
          placeholder={p.values.length === 0 ? t('facts_notSet') : ''}
          onInput={(e) => setDraft((e.target as HTMLInputElement).value)}
        />{' '}
        <button type="submit">{p.cardinality === 'one' && p.values.length ? t('facts_change') : t('facts_add')}</button>
      </form>
    </li>
  )
}

export function AppFacts({ installationId }: { installationId: string }) {
  const q = useQuery(`facts:covered:${installationId}`, () => factsApi.covered(installationId))
  const [error, setError] = useState<unknown>(null)
  const items = q.data?.items ?? []
  if (q.data && items.length === 0) return null
  return (
    <section aria-label={t('facts_aboutYou')}>
      <h3>{t('facts_aboutYou')}</h3>
      <p class="muted">{t('facts_help')}</p>
      {q.loading ? <Loading /> : null}
      <ErrorNote error={q.error ?? error} />
      <ul class="plain">
        {items.map((p) => (
          <PredicateRow key={p.predicate} p={p} onError={setError} />
        ))}
      </ul>
    </section>
  )
}

export function EntitiesPage() {
  const q = useQuery('facts:entities', factsApi.entities)
  const [error, setError] = useState<unknown>(null)
  const [into, setInto] = useState<Record<string, string>>({})
  const items = q.data?.items ?? []
  const done = () => invalidate('facts:')
  return (
    <>
      <TopBar title={t('entities_title')}>
        <a href={paths.account()}>{t('myAccount')}</a>
        <span>{t('entities_title')}</span>
      </TopBar>
      <main id="main" class="page">
        <h1>{t('entities_title')}</h1>
        <p class="muted">{t('entities_help')}</p>
        {q.loading ? <Loading /> : null}
        <ErrorNote error={q.error ?? error} />
        {q.data && items.length === 0 ? <p class="muted">{t('entities_none')}</p> : null}
        {items.length ? (
          <table class="grid">
            <thead>
              <tr>
                <th>{t('entities_name')}</th>
                <th>{t('entities_kind')}</th>
                <th>{t('entities_identifiers')}</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {items.map((e) => {
                const others = items.filter((o) => o.id !== e.id && o.kind === e.kind)
                return (
                  <tr key={e.id}>
                    <td>{e.display_name}</td>
                    <td>{e.kind}</td>
                    <td>{e.identifiers.map((i) => `${i.kind}: ${i.value}`).join(', ')}</td>
                    <td>
                      {others.length ? (
                        <>
                          <select
                            aria-label={t('entities_mergeIntoNamed', { name: e.display_name })}
                            value={into[e.id] ?? ''}
                            onChange={(ev) => setInto({ ...into, [e.id]: (ev.target as HTMLSelectElement).value })}
                          >
                            <option value="">—</option>
                            {others.map((o) => (
                              <option key={o.id} value={o.id}>
                                {o.display_name}
                              </option>
                            ))}
                          </select>{' '}
                          <button
                            type="button"
                            disabled={!into[e.id]}
                            onClick={() => {
                              setError(null)
                              factsApi.merge(into[e.id], e.id).then(done).catch(setError)
                            }}
                          >
                            {t('entities_merge')}
                          </button>{' '}
                        </>
                      ) : null}
                      <button
                        type="button"
                        class="danger"
                        aria-label={t('entities_deleteNamed', { name: e.display_name })}
                        onClick={() => {
                          setError(null)
                          factsApi.remove(e.id).then(done).catch(setError)
                        }}
                      >
                        {t('facts_delete')}
                      </button>
                    </td>
                  </tr>
                )
              })}
            </tbody>
          </table>
        ) : null}
      </main>
    </>
  )
}
