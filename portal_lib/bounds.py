"""The largest integers the portal takes from people: its PostgreSQL columns' ranges.

Every integer a form, serializer or query parameter accepts has a maximum at or
below one of these, so an oversized number is a 400 naming the field, never a
database error.
"""

from portal_lib.errors import PortalError

INT_MAX = 2**31 - 1  # integer columns (IntegerField, PositiveIntegerField)
BIGINT_MAX = 2**63 - 1  # bigint columns (BigIntegerField): byte offsets, sizes

# The most digits a row id can have (BIGINT_MAX has 19).
_ID_DIGITS = len(str(BIGINT_MAX))


class IdOutOfRange(PortalError):
    """A query parameter names an id no row can have (past the bigint column's range)."""

    code = "id_out_of_range"


def row_id(text: str) -> int | None:
    """The row id `text` writes in ASCII digits, or None.

    `str.isdigit` also takes '²' (which `int` refuses: a 500) and Arabic-Indic
    digits, so ids are checked as ASCII; a number past the column is no row's.
    """
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > _ID_DIGITS:
        return None
    value = int(text)
    return value if value <= BIGINT_MAX else None


def row_ids(text: str, *, name: str, limit: int) -> list[int]:
    """The ids of a comma-separated query parameter, in order, each once, at most `limit`.

    A part that is no number is skipped, as a stale link's would be; a number past the
    column's range is a 400 naming the parameter, like every other oversized integer
    (SQLite raises OverflowError on it, a 500).
    """
    ids: dict[int, None] = {}
    for part in text.split(","):
        found = row_id(part)
        if found is None:
            digits = part.strip()
            if digits.isascii() and digits.isdigit():
                raise IdOutOfRange(
                    f"{name}: {digits[:24]}{'...' if len(digits) > 24 else ''} is no id;"
                    f" ids are whole numbers up to {BIGINT_MAX}.",
                    errors={name: [f"Ids are whole numbers up to {BIGINT_MAX}."]},
                )
            continue
        if len(ids) < limit:
            ids[found] = None
    return list(ids)
