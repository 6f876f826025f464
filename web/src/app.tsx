/** Routes -> pages. App pages need a signed-in user; public pages don't. */
import { useEffect } from 'preact/hooks'
import { LoginPage, RegisterPage, ResetPasswordPage, VerifyEmailPage } from './pages/auth'
import { HomePage, KnowledgeBasePage, SearchPage, WorkspacePage } from './pages/app'
import { DocumentPage } from './pages/Document'
import { InvitationPage, SharePage } from './pages/public'
import { AccountPage } from './pages/account'
import { AppsPage } from './pages/apps'
import { EntitiesPage } from './pages/facts'
import { AdminPage } from './pages/admin'
import { KbSettingsPage, WorkspaceSettingsPage } from './pages/settings'
import { Loading, PublicFrame } from './components/ui'
import { t, useLang } from './lib/i18n'
import { navigate, onLinkClick, paths, useRoute, type Route } from './lib/router'
import { useSession } from './lib/session'

const PUBLIC = new Set(['login', 'register', 'verify-email', 'reset-password', 'invitation', 'share', 'share-doc', 'not-found'])

function Page({ route }: { route: Route }) {
  switch (route.name) {
    case 'login':
      return <LoginPage route={route} />
    case 'register':
      return <RegisterPage route={route} />
    case 'verify-email':
      return <VerifyEmailPage route={route} />
    case 'reset-password':
      return <ResetPasswordPage route={route} />
    case 'invitation':
      return <InvitationPage route={route} />
    case 'share':
    case 'share-doc':
      return <SharePage key={route.params.token} route={route} />
    case 'home':
    case 'workspaces':
      return <HomePage />
    case 'workspace':
      return <WorkspacePage key={route.params.workspaceId} route={route} />
    case 'kb':
      return <KnowledgeBasePage key={route.params.kbId} route={route} />
    case 'document':
      return <DocumentPage key={route.params.docId} route={route} />
    case 'search':
      return <SearchPage route={route} />
    case 'account':
      return <AccountPage />
    case 'account-apps':
      return <AppsPage />
    case 'account-entities':
      return <EntitiesPage />
    case 'admin':
      return <AdminPage route={route} />
    case 'kb-settings':
      return <KbSettingsPage key={route.params.kbId} route={route} />
    case 'workspace-settings':
      return <WorkspaceSettingsPage key={route.params.workspaceId} route={route} />
    default:
      return (
        <PublicFrame title={t('notFound')}>
          <p>{t('notFoundPage')}</p>
          <a href={paths.home()}>{t('homeTitle')}</a>
        </PublicFrame>
      )
  }
}

export function App() {
  useLang()
  const route = useRoute()
  const session = useSession()
  const needsUser = !PUBLIC.has(route.name)
  useEffect(() => {
    document.addEventListener('click', onLinkClick)
    return () => document.removeEventListener('click', onLinkClick)
  }, [])
  useEffect(() => {
    if (route.name === 'root') navigate(session.status === 'signed-in' ? paths.home() : paths.login(), { replace: true })
    else if (needsUser && session.status === 'anonymous') navigate(paths.login(location.pathname + location.search), { replace: true })
  }, [route.name, session.status])
  // App pages render while the session loads (their requests answer 401 and the redirect above
  // runs if nobody is signed in). The document page starts the editor chunk itself.
  if (route.name === 'root' || (needsUser && session.status === 'anonymous')) return <Loading />
  return (
    <>
      <a class="skip" href="#main">
        {t('skipToContent')}
      </a>
      <Page route={route} />
    </>
  )
}
