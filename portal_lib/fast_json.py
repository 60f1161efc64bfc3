"""JSON in the poll path by orjson, with the standard library wherever orjson refuses.

A poll of a thousand running jobs formats and reads JSON some tens of thousands of times:
the parser's frames both ways, every metrics.jsonl record, each job's run summary and
each log file's reader state. orjson does each in a fraction of the standard library's
time. It refuses what Python's `json` takes (NaN and Infinity in a record, an integer
past 64 bits, a lone surrogate); those values go through `json` as before, so no input
that was read before is refused now. Pure: the parser's own process imports no Django.
"""

import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS  # {1: x} as {"1": x}, as `json` writes it


def dumps(value: object) -> bytes:
    """`value` as JSON text (UTF-8). NaN and infinities become null, as jsonb cannot hold
    them (where `json.dumps` writes a NaN token that PostgreSQL then refuses)."""
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: a big integer, a surrogate, an unknown type
        return json.dumps(value).encode()


def loads(data: str | bytes) -> Any:
    """The value of JSON text; raises ValueError (json.JSONDecodeError) when it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:  # NaN, Infinity, 1e400 and the like: `json` reads them
        return json.loads(data)
