"""A local run's mail, kept where its users can read it: one `.eml` file per message.

`make run` has no mail server, and Django's console backend prints mail into the
worker's terminal where no user of the portal sees it. `OutboxBackend` writes each
message into OUTBOX_DIR instead; `outbox_read` gives them back, newest first, for the
page that shows each person the mail sent to them (`web.outbox`).
"""

import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from email import policy
from email.message import EmailMessage as ParsedMessage
from email.parser import BytesParser
from email.utils import getaddresses, parsedate_to_datetime
from pathlib import Path

from django.conf import settings
from django.core.mail.backends.base import BaseEmailBackend
from django.core.mail.message import EmailMessage

SUFFIX = ".eml"
MAX_SHOWN = 200
BODY_MAX_CHARS = 20_000


class OutboxBackend(BaseEmailBackend):
    """Django's mail backend for a local run: each message a file in OUTBOX_DIR (0600)."""

    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        folder = Path(settings.OUTBOX_DIR)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        sent = 0
        for message in email_messages:
            if not message.recipients():
                continue
            # Named by time first, so the listing sorts newest last without opening a file.
            name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}{SUFFIX}"
            fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(message.message().as_bytes())
            sent += 1
        return sent


@dataclass(frozen=True)
class Mail:
    name: str
    sent: datetime | None
    sender: str
    to: list[str]
    subject: str
    body: str


def _text(parsed: ParsedMessage) -> str:
    part = parsed.get_body(preferencelist=("plain",))
    body = part.get_content() if part is not None else ""
    return body[:BODY_MAX_CHARS]


def _mail(path: Path) -> Mail:
    # With the default policy the parser makes EmailMessage objects (get_body and all).
    parsed = BytesParser(policy=policy.default).parsebytes(path.read_bytes())
    date = parsed.get("Date")
    recipients = [a for _, a in getaddresses([str(v) for v in parsed.get_all("To", [])])]
    recipients += [a for _, a in getaddresses([str(v) for v in parsed.get_all("Cc", [])])]
    return Mail(
        name=path.stem,
        sent=parsedate_to_datetime(str(date)) if date else None,
        sender=str(parsed.get("From", "")),
        to=recipients,
        subject=str(parsed.get("Subject", "")),
        body=_text(parsed),
    )


def outbox_read(*, address: str | None, limit: int = MAX_SHOWN) -> list[Mail]:
    """The newest `limit` messages, those sent to `address` only unless it is None (all)."""
    folder = Path(settings.OUTBOX_DIR or "")
    if not settings.OUTBOX_DIR or not folder.is_dir():
        return []
    found: list[Mail] = []
    wanted = address.lower() if address is not None else None
    for path in sorted(folder.glob(f"*{SUFFIX}"), reverse=True):
        mail = _mail(path)
        if wanted is None or wanted in (a.lower() for a in mail.to):
            found.append(mail)
            if len(found) >= limit:
                break
    return found
