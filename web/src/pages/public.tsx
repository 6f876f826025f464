/** Public pages reached from links: /invitations/:token and /share/:token (docs/permissions.md). */
import { useEffect, useState } from 'preact/hooks'
import { api, ApiError, type S } from '../api/client'
import { MarkdownView } from '../components/MarkdownView'
import { ErrorNote, Field, Loading, PublicFrame, LanguageSwitch, TabTitle, TreeToggle } from '../components/ui'
import { t } from '../lib/i18n'
import { navigate, paths, type Route } from '../lib/router'
import { useSession } from '../lib/session'
import { buildTree, type TreeNode } from '../lib/tree'

function objectUrl(type: string, id: string, kbId?: string): string {
  if (type === 'workspace') return paths.workspace(id)
  if (type === 'knowledge_base') return paths.kb(id)
  return kbId ? paths.doc(kbId, id) : paths.home()
}

export function InvitationPage({ route }: { route: Route }) {
  const token = route.params.token
  const session = useSession()
  const [view, setView] = useState<S['InvitationView'] | null>(null)
  const [error, setError] = useState<unknown>(null)
  const [result, setResult] = useState<S['AcceptOut'] | null>(null)
  const [target, setTarget] = useState<string | null>(null)
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const [name, setName] = useState('')
  useEffect(() => {
    api.invitation(token).then(setView).catch(setError)
  }, [token])

  const accept = (body?: S['AcceptIn']) => {
    setError(null)
    api
      .acceptInvitation(token, body)
      .then(async (r) => {
        setResult(r)
        if (r.status === 'accepted') {
          let kbId: string | undefined
          if (r.object_type === 'document') kbId = (await api.document(r.object_id)).knowledge_base_id
          setTarget(objectUrl(r.object_type, r.object_id, kbId))
        }
      })
      .catch(setError)
  }

  if (!view) {
    return (
      <PublicFrame title={t('invitationTitle')}>
        {error ? <ErrorNote error={error} /> : <Loading />}
      </PublicFrame>
    )
  }
  const title = view.object_title ?? ''
  return (
    <PublicFrame title={t('invitationTitle')}>
      <p>{t('invitationTo', { title, role: view.role })}</p>
      {view.require_approval ? <p class="muted">{t('invitationApproval')}</p> : null}
      {result ? (
        <p role="status">
          {result.status === 'accepted'
            ? t('invitationAccepted')
            : result.status === 'awaiting_approval'
              ? t('invitationAwaiting')
              : t('invitationRegistered')}{' '}
          {target ? <a href={target}>{t('invitationOpen')}</a> : null}
        </p>
      ) : session.status === 'signed-in' ? (
        <button type="button" class="primary" onClick={() => accept()}>
          {t('invitationAccept')}
        </button>
      ) : session.status === 'anonymous' ? (
        <>
          <p>{t('invitationSignInFirst')}</p>
          <p>
            <a href={paths.login(`/invitations/${token}`)}>{t('signIn')}</a>
          </p>
          <form
            onSubmit={(e) => {
              e.preventDefault()
              accept({ account: { email, password, display_name: name || null } })
            }}
          >
            <h2>{t('register')}</h2>
            <Field label={t('displayName')} name="display_name" value={name} onInput={setName} />
            <Field label={t('email')} name="email" type="email" value={email} onInput={setEmail} required />
            <Field label={t('password')} name="password" type="password" value={password} onInput={setPassword} required minLength={8} />
            <button type="submit" class="primary">
              {t('register')}
            </button>
          </form>
        </>
      ) : (
        <Loading />
      )}
      <ErrorNote error={error} />
    </PublicFrame>
  )
}

type Shared = S['SharedOut']

/** One line per item, indented by level, a long title cut with an ellipsis (whole in its tooltip). */
function ShareTree(props: { nodes: TreeNode[]; token: string; current: string | null; top?: boolean }) {
  return (
    <ul role="group" class={props.top ? 'share-tree' : undefined}>
      {props.nodes.map((n) => (
        <li key={n.item.id}>
          {n.item.type === 'folder' ? (
            <span class="folder" title={n.item.title}>
              {n.item.title}
            </span>
          ) : (
            <a href={paths.shareDoc(props.token, n.item.id)} title={n.item.title} aria-current={props.current === n.item.id ? 'page' : undefined}>
              {n.item.title}
            </a>
          )}
          {n.children.length ? <ShareTree nodes={n.children} token={props.token} current={props.current} /> : null}
        </li>
      ))}
    </ul>
  )
}

export function SharePage({ route }: { route: Route }) {
  const token = route.params.token
  const docId = route.params.docId ?? null
  const [shared, setShared] = useState<Shared | null>(null)
  const [doc, setDoc] = useState<Record<string, unknown> | null>(null)
  const [error, setError] = useState<ApiError | null>(null)
  const [needPassword, setNeedPassword] = useState(false)
  const [password, setPassword] = useState('')
  const [pwError, setPwError] = useState<unknown>(null)
  const [treeOpen, setTreeOpen] = useState(false) // narrow screens (TreeToggle)
  useEffect(() => setTreeOpen(false), [docId])

  const load = () => {
    setError(null)
    api
      .shared(token)
      .then((s) => {
        setNeedPassword(false)
        setShared(s)
      })
      .catch((e: ApiError) => {
        if (e.code === 'SHARE_PASSWORD_REQUIRED') setNeedPassword(true)
        else setError(e)
      })
  }
  useEffect(load, [token])
  useEffect(() => {
    if (!shared) return
    if (docId) {
      api.sharedDocument(token, docId).then(setDoc).catch(setError)
    } else {
      setDoc((shared.document as Record<string, unknown> | null) ?? null)
    }
  }, [shared, docId])

  if (needPassword) {
    return (
      <PublicFrame title={t('shareTitle')}>
        <p>{t('sharePasswordPrompt')}</p>
        <form
          onSubmit={(e) => {
            e.preventDefault()
            setPwError(null)
            api.sharePassword(token, password).then(load).catch(setPwError)
          }}
        >
          <Field label={t('password')} name="share-password" type="password" value={password} onInput={setPassword} required />
          <ErrorNote error={pwError} />
          <button type="submit" class="primary">
            {t('shareOpen')}
          </button>
        </form>
      </PublicFrame>
    )
  }
  if (error) {
    const msg =
      error.code === 'UNAUTHENTICATED' ? t('shareLoginRequired') : error.code === 'PERMISSION_DENIED' ? t('shareNotAllowed') : t('shareUnavailable')
    return (
      <PublicFrame title={t('shareTitle')}>
        <p role="alert">{msg}</p>
        {error.code === 'UNAUTHENTICATED' ? <a href={paths.login(route.name === 'share' ? `/share/${token}` : location.pathname)}>{t('signIn')}</a> : null}
      </PublicFrame>
    )
  }
  if (!shared) {
    return (
      <PublicFrame title={t('shareTitle')}>
        <Loading />
      </PublicFrame>
    )
  }
  const kb = shared.knowledge_base as { title?: string; description?: string } | null
  const nodes = buildTree(shared.tree as S['TreeItem'][])
  const heading = (doc?.title as string | undefined) ?? kb?.title ?? ''
  const targets = {
    documentUrl: (id: string) => paths.shareDoc(token, id),
    assetUrl: (id: string) => `/api/share/${encodeURIComponent(token)}/assets/${id}`,
    navigate,
  }
  return (
    <div class="share-layout">
      <TabTitle title={heading} />
      <header class="topbar">
        <span class="brand">{t('appName')}</span>
        <span class="crumbs">{kb?.title ?? (shared.document as { title?: string } | null)?.title}</span>
        <LanguageSwitch />
      </header>
      <div class="doc-layout" data-tree-open={treeOpen ? 'true' : undefined}>
        {nodes.length ? (
          <nav class="sidebar" aria-label={t('tree')}>
            <ShareTree nodes={nodes} token={token} current={(doc?.id as string | undefined) ?? null} top />
          </nav>
        ) : null}
        <main id="main" class="doc-main">
          {nodes.length ? <TreeToggle open={treeOpen} onToggle={() => setTreeOpen(!treeOpen)} /> : null}
          <h1 class="doc-title">{heading}</h1>
          {doc && typeof doc.markdown === 'string' ? (
            <MarkdownView markdown={doc.markdown} targets={targets} label={heading} />
          ) : kb?.description ? (
            <p>{kb.description}</p>
          ) : null}
        </main>
      </div>
    </div>
  )
}
