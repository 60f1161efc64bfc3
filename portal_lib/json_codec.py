"""Django's JSONField, read and written on PostgreSQL by orjson (`portal_lib.fast_json`)."""

from typing import Any

from django.db import models
from psycopg.types.json import Jsonb

from portal_lib.fast_json import dumps, loads

__all__ = ["JSONField", "dumps", "loads"]


class JSONField(models.JSONField):
    """Django's JSONField, its values read and written by `loads` and `dumps` on
    PostgreSQL when it has no encoder or decoder of its own."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if self.decoder is None and isinstance(value, str):
            try:
                return loads(value)
            except ValueError:
                return value  # as Django's: text that is not JSON comes back as it is
        return super().from_db_value(value, expression, connection)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if self.encoder is not None or connection.vendor != "postgresql":
            return super().get_db_prep_value(value, connection, prepared)
        if not prepared:
            value = self.get_prep_value(value)
        return Jsonb(value, dumps=dumps)
