"""Outgoing mail: SMTP when SMTP_HOST is set, else ``$OPENKB_HOME/outbox/*.eml`` plus a log line.

The outbox is how an operator of the embedded appliance (and the tests) reads verification and
password-reset links without a mail server.
"""

from __future__ import annotations

import logging
import smtplib
import time
import uuid
from email.message import EmailMessage
from pathlib import Path

from openkb.config import Settings
from openkb.errors import ServiceUnavailable

log = logging.getLogger("openkb.mail")


class Mailer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @property
    def outbox(self) -> Path:
        return self.settings.openkb_home / "outbox"

    @property
    def to_outbox(self) -> bool:
        """True when mail is written to the outbox folder instead of sent (no SMTP_HOST): whoever
        waits for a link must then get it from the operator, and the web app says so instead of
        "check your mailbox" (docs/accounts.md#mail)."""
        return not self.settings.smtp_host

    def send(self, to: str, subject: str, body: str) -> str:
        msg = EmailMessage()
        msg["From"] = self.settings.smtp_from
        msg["To"] = to
        msg["Subject"] = subject
        msg["Message-ID"] = f"<{uuid.uuid4()}@openkb>"
        msg.set_content(body)
        if self.to_outbox:
            self.outbox.mkdir(parents=True, exist_ok=True)
            path = self.outbox / f"{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}.eml"
            path.write_bytes(bytes(msg))
            log.info("mail to %s (%s) written to %s", to, subject, path)
            return str(path)
        try:
            with smtplib.SMTP(self.settings.smtp_host, self.settings.smtp_port, timeout=10) as smtp:
                smtp.ehlo()
                if smtp.has_extn("starttls"):
                    smtp.starttls()
                if self.settings.smtp_user:
                    smtp.login(self.settings.smtp_user, self.settings.smtp_password or "")
                smtp.send_message(msg)
        except (OSError, smtplib.SMTPException) as exc:
            raise ServiceUnavailable(f"SMTP_HOST {self.settings.smtp_host} refused the mail: {exc}") from None
        return msg["Message-ID"]

    def check(self) -> str:
        if not self.settings.smtp_host:
            self.outbox.mkdir(parents=True, exist_ok=True)
            return f"outbox folder {self.outbox}"
        try:
            with smtplib.SMTP(self.settings.smtp_host, self.settings.smtp_port, timeout=5) as smtp:
                code, banner = smtp.ehlo()
        except (OSError, smtplib.SMTPException) as exc:
            raise ServiceUnavailable(
                f"SMTP_HOST {self.settings.smtp_host}:{self.settings.smtp_port} unreachable: {exc}"
            ) from None
        return f"SMTP {code} {banner.decode(errors='replace')[:40]}"
