"""The Redis cache's serializer: JSON, never pickle.

Django's default unpickles what it reads, so anyone who can write to Redis can
run code in the web server. This one reads back data only: JSON values, plus
datetimes, timedeltas, tuples and the dataclasses named in settings
CACHE_JSON_TYPES (an allow-list: a type name in the data never picks what is
built). Anything else fails at `set`, where the bug is, not at `get`.
"""

import dataclasses
import json
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string
from redis.exceptions import RedisError

TYPE, FIELDS = "__type__", "__fields__"
# What a cache call raises while Redis cannot be reached: callers that can do without
# the cache (a throttle's count, a look-up's shortcut) catch these and go on.
CACHE_DOWN: tuple[type[Exception], ...] = (RedisError, OSError)


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return {TYPE: "datetime", FIELDS: value.isoformat()}
    if isinstance(value, timedelta):
        return {TYPE: "timedelta", FIELDS: value.total_seconds()}
    if isinstance(value, tuple):
        return {TYPE: "tuple", FIELDS: [_encode(item) for item in value]}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value) or TYPE in value:
            raise TypeError("the JSON cache holds dicts with string keys only")
        return {key: _encode(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = f"{type(value).__module__}.{type(value).__qualname__}"
        if name not in settings.CACHE_JSON_TYPES:
            raise TypeError(f"{name} is not in CACHE_JSON_TYPES: the cache cannot hold it")
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {TYPE: name, FIELDS: fields}
    raise TypeError(f"the JSON cache cannot hold a {type(value).__name__}")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    if TYPE not in value:
        return {key: _decode(item) for key, item in value.items()}
    kind, fields = value[TYPE], value[FIELDS]
    if kind == "datetime":
        return datetime.fromisoformat(fields)
    if kind == "timedelta":
        return timedelta(seconds=fields)
    if kind == "tuple":
        return tuple(_decode(item) for item in fields)
    if kind not in settings.CACHE_JSON_TYPES:
        raise ValueError(f"{kind!r} is not a type the cache may build")
    return import_string(kind)(**{key: _decode(item) for key, item in fields.items()})


class JSONSerializer:
    def dumps(self, obj: Any) -> bytes | int:
        # Integers stay plain, as Django's own does, so that incr() and decr() work.
        if type(obj) is int:
            return obj
        return json.dumps(_encode(obj), separators=(",", ":")).encode()

    def loads(self, data: bytes) -> Any:
        try:
            return int(data)
        except ValueError:
            return _decode(json.loads(data))
