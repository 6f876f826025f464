"""The authorize endpoint is not an open redirect (docs/oauth.md#the-authorize-page, RFC 9700
§4.11.2): anyone may register a client with any redirect URI, so an error (or a Deny) is sent
back to that URI automatically only when the server has reason to trust it; otherwise the
server's own page shows the error with a link the user may follow. And the token request must
repeat the redirect URI of the authorization request (RFC 6749 §4.1.3)."""

from __future__ import annotations

import secrets

import pytest

from tests.api.helpers import make_login_user
from tests.oauth.conftest import redirect_params
from tests.oauth.test_oauth_cimd import DocServer


@pytest.fixture()
def user(committed):
    return make_login_user(committed)


@pytest.fixture(scope="module")
def docs():
    d = DocServer()
    yield d
    d.httpd.shutdown()


@pytest.mark.parametrize("evil", ["https://evil.example/cb", "ms-msdt:/id", "cursor://anysphere.cursor-mcp/cb"])
def test_an_unknown_clients_errors_are_a_page_not_a_redirect(oauth_client, evil):
    """The reviewer's link: a freshly registered client, an invalid request, nobody signed in."""
    oauth_client.redirect_uri = evil
    oauth_client.register([evil])
    v = secrets.token_urlsafe(48)
    for over in ({"response_type": "token"}, {"scope": "kb:read admin"}, {"code_challenge_method": "plain"}):
        page = oauth_client.start(v, **over)
        assert page.status_code == 400, (over, page.status_code, page.headers.get("location"))
        assert "location" not in page.headers
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        # at most a link the user clicks, carrying the error to the client
        assert 'href="' + evil.replace("&", "&amp;") in page.text
        assert "error=" in page.text.split('href="', 1)[1].split('"', 1)[0]


def test_deny_without_an_earlier_grant_is_a_page_with_a_link(oauth_client, user):
    oauth_client.redirect_uri = "https://evil.example/cb"
    oauth_client.register([oauth_client.redirect_uri])
    consent = oauth_client.submit(
        oauth_client.start(secrets.token_urlsafe(48)), email=user.email, password=user.password
    )
    assert consent.status_code == 200 and 'value="deny"' in consent.text
    denied = oauth_client.submit(consent, action="deny")
    assert denied.status_code == 200 and "location" not in denied.headers
    link = denied.text.split('href="', 1)[1].split('"', 1)[0]
    assert link.startswith("https://evil.example/cb?") and "error=access_denied" in link


def test_a_client_the_user_granted_gets_its_errors_and_denials_redirected(oauth_client, user):
    oauth_client.register()
    oauth_client.tokens(user.email, user.password)  # an active grant of this user (the browser stays signed in)
    v = secrets.token_urlsafe(48)
    q = redirect_params(oauth_client.start(v, response_type="token"))
    assert q["error"] == "unsupported_response_type"
    q = redirect_params(oauth_client.start(v, scope="kb:read doc:write admin"))
    assert q["error"] == "invalid_scope"
    consent = oauth_client.start(v, scope="kb:read doc:write")  # a new scope: consent is asked again
    assert consent.status_code == 200 and 'value="deny"' in consent.text
    assert redirect_params(oauth_client.submit(consent, action="deny"))["error"] == "access_denied"


def test_a_metadata_document_client_redirecting_to_its_own_origin_is_trusted(oauth_client, docs):
    path = f"/trusted-{secrets.token_hex(4)}.json"
    url = docs.base + path
    own = docs.base + "/callback"
    docs.serve(path, {"client_id": url, "client_name": "Own Origin", "redirect_uris": [own]})
    oauth_client.client_id, oauth_client.redirect_uri = url, own
    q = redirect_params(oauth_client.start(secrets.token_urlsafe(48), response_type="token"))
    assert q["error"] == "unsupported_response_type"
    # the same document naming a redirect elsewhere: not trusted
    path2 = f"/elsewhere-{secrets.token_hex(4)}.json"
    url2 = docs.base + path2
    docs.serve(path2, {"client_id": url2, "redirect_uris": ["https://evil.example/cb"]})
    oauth_client.client_id, oauth_client.redirect_uri = url2, "https://evil.example/cb"
    page = oauth_client.start(secrets.token_urlsafe(48), response_type="token")
    assert page.status_code == 400 and "location" not in page.headers
