"""Token format and hashing: `ptk_<prefix>_<secret>`, stored as prefix + SHA-256."""

import hashlib
import secrets
from dataclasses import dataclass

TOKEN_PREFIX = "ptk"  # noqa: S105 - the visible start of every token
PREFIX_CHARS = 12


@dataclass(frozen=True)
class NewToken:
    """A token's parts right after it is made: the only time its secret exists."""

    prefix: str
    secret: str

    @property
    def text(self) -> str:
        return f"{TOKEN_PREFIX}_{self.prefix}_{self.secret}"


def token_new() -> NewToken:
    # 12 hex characters to look a token up (48 bits: collisions are rare, and retried);
    # the secret's 256 random bits are what guards it.
    return NewToken(prefix=secrets.token_hex(PREFIX_CHARS // 2), secret=secrets.token_urlsafe(32))


def token_digest(secret: str) -> str:
    # A fast hash is right here: the secret is random, not a guessable password.
    return hashlib.sha256(secret.encode()).hexdigest()


def token_parse(text: str) -> tuple[str, str] | None:
    """The (prefix, secret) of a token's text, or None when it is not one of ours."""
    head, sep, rest = text.partition("_")
    if head != TOKEN_PREFIX or not sep:
        return None
    prefix, sep, secret = rest.partition("_")
    if not sep or len(prefix) != PREFIX_CHARS or not secret:
        return None
    return prefix, secret


def digest_matches(secret: str, digest: str) -> bool:
    return secrets.compare_digest(token_digest(secret), digest)
