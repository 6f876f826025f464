"""Where the links go: over SMTP to the address, or, with no SMTP_HOST, to the server's outbox
folder, which the sign-up and password-reset answers name (``mail_to_outbox``) so the web app
does not tell a visitor to check a mailbox nothing was sent to (docs/accounts.md#mail).

The SMTP path runs against a small SMTP server on loopback (``helpers.SmtpSink``): the message
really crosses a socket as SMTP, as it would to a mail relay.
"""

from __future__ import annotations

import email

import pytest

from openkb.mail import Mailer
from tests.api.helpers import (
    SmtpSink,
    auth_settings_override,
    outbox_messages,
    register_user,
    smtp_delivery,
    unique_email,
)


def _to(sink: SmtpSink, address: str) -> list[email.message.EmailMessage]:
    return [m for m in sink.messages if str(m["To"]).lower() == address.lower()]


@pytest.mark.parametrize("taken", [False, True], ids=["new address", "taken address"])
def test_without_smtp_the_answers_say_the_link_is_in_the_outbox(http, committed, test_home, taken):
    with auth_settings_override(committed, email_verification_required=True):
        address = register_user(http).email if taken else unique_email()
        a = register_user(http, address)
        body = a.response.json()
        assert body["verification_required"] is True
        assert body["mail_to_outbox"] is True  # the same whether or not the address was free
        assert outbox_messages(test_home, address)
    r = http.post("/api/auth/password-reset/request", json={"email": address})
    assert r.status_code == 202
    assert r.json()["mail_to_outbox"] is True
    # an address with no account gets the same answer (no account enumeration)
    r = http.post("/api/auth/password-reset/request", json={"email": unique_email()})
    assert r.status_code == 202 and r.json()["mail_to_outbox"] is True


def test_with_smtp_the_links_are_mailed_and_the_answers_say_so(http, committed, test_home, app_ctx):
    with smtp_delivery(app_ctx) as sink, auth_settings_override(committed, email_verification_required=True):
        a = register_user(http)
        assert a.response.json()["verification_required"] is True
        assert a.response.json()["mail_to_outbox"] is False
        [msg] = _to(sink, a.email)
        assert "/verify-email?token=" in msg.get_content()
        r = http.post("/api/auth/password-reset/request", json={"email": a.email})
        assert r.status_code == 202 and r.json()["mail_to_outbox"] is False
        assert "/reset-password?token=" in _to(sink, a.email)[-1].get_content()
    assert outbox_messages(test_home, a.email) == []


def test_no_verification_no_mail_and_no_outbox_flag(http, committed, test_home):
    with auth_settings_override(committed, email_verification_required=False):
        a = register_user(http)
    assert a.response.json()["verification_required"] is False
    assert a.response.json()["mail_to_outbox"] is False
    assert outbox_messages(test_home, a.email) == []


def test_a_relay_that_refuses_is_one_log_line_and_the_sign_up_stands(http, committed, app_ctx, caplog):
    """The account is committed before the mail goes out: a refused mail leaves it waiting for a
    new link (signing up again mails one), and the log says why in one line, no traceback."""
    from openkb.runtime.embedded import free_port

    before = app_ctx.mailer
    app_ctx.mailer = Mailer(app_ctx.settings.model_copy(update={"smtp_host": "127.0.0.1", "smtp_port": free_port()}))
    try:
        with auth_settings_override(committed, email_verification_required=True), caplog.at_level("ERROR"):
            a = register_user(http)
    finally:
        app_ctx.mailer = before
    assert a.status == "pending_email_verification"
    [rec] = [r for r in caplog.records if r.getMessage().startswith("could not send")]
    assert a.email in rec.getMessage() and "SMTP_HOST 127.0.0.1" in rec.getMessage()
    assert rec.exc_info is None
