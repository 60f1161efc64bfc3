"""Encryption at rest for secrets stored in the database (Fernet, keys from the environment)."""

import functools
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models


def _keys() -> tuple[str, ...]:
    # Read at call time, not import time, so tests and key rotation can change it.
    keys = settings.FIELD_ENCRYPTION_KEYS
    if not keys:
        raise ImproperlyConfigured(
            "FIELD_ENCRYPTION_KEYS is empty: set it to one or more Fernet keys "
            '(python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key())")'
        )
    return tuple(keys)


@functools.lru_cache(maxsize=8)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def encrypt(plaintext: str) -> str:
    return _fernet(_keys()).encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    return _decrypted(token, _keys())


# A poll loads every live attempt with its cluster and account, whose keys are the same
# few tokens on every row: decrypting each again took 12 % of a poll of 1,000 jobs
# (bench/soak.py, profiled). A token always decrypts to the same text under the same keys.
@functools.lru_cache(maxsize=1024)
def _decrypted(token: str, keys: tuple[str, ...]) -> str:
    try:
        return _fernet(keys).decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ImproperlyConfigured(
            "A stored secret cannot be decrypted with FIELD_ENCRYPTION_KEYS: "
            "the key that encrypted it is missing from the list"
        ) from exc


class EncryptedTextField(models.TextField):
    """A text column that holds a Fernet token; Python code sees the plaintext."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        if value is None or value == "":
            return value
        return decrypt(value)

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return encrypt(value)
