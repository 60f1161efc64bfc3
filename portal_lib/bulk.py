"""Many rows in few statements: binary COPY on PostgreSQL, plain statements elsewhere.

The poll writes tens of thousands of rows a second. As SQL parameters they cost more
to send than to store: a float or a bytea array in text form is formatted, escaped
and parsed again (an append of 40,000 series spent most of its time there). Binary
COPY sends each value in its wire form and skips the SQL layer. COPY cannot upsert,
so rows that must be merged go to a session's temporary staging table first, and one
INSERT ... SELECT ... ON CONFLICT moves them (`staged_rows`). SQLite, the local-run
default, takes the same rows as VALUES lists (`row_source`).
"""

import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Field, Lookup, Model, Q

Row = tuple[Any, ...]  # values of one SQL row
Column = tuple[str, str]  # name, PostgreSQL type


def copy_enabled() -> bool:
    """Whether bulk writes use COPY: on PostgreSQL unless settings.BULK_COPY is False.

    The switch exists so that a benchmark can time the plain path beside it.
    """
    return connection.vendor == "postgresql" and bool(getattr(settings, "BULK_COPY", True))


def copy_rows(table: str, columns: Sequence[Column], rows: Iterable[Row]) -> None:
    """Append rows to a table with one binary COPY (PostgreSQL only)."""
    names = ", ".join(connection.ops.quote_name(name) for name, _ in columns)
    statement = f"COPY {connection.ops.quote_name(table)} ({names}) FROM STDIN (FORMAT BINARY)"
    with connection.cursor() as cursor, cursor.copy(statement) as copy:
        # A type's modifier (varchar(100)) is the table's business, not the wire format's.
        copy.set_types([kind.split("(", 1)[0] for _, kind in columns])
        for row in rows:
            copy.write_row(row)


def staged_rows(name: str, columns: Sequence[Column], rows: Iterable[Row]) -> str:
    """COPY rows into the session's temporary table `name`; returns SQL that takes them out.

    Call it inside a transaction, and use the statement in the same one: the table is
    emptied at every commit (ON COMMIT DELETE ROWS, which also clears what a failed
    statement left). The returned statement (a `DELETE ... RETURNING` for a WITH clause)
    empties it as it reads it, so batches in one transaction never see each other's rows.
    """
    table = connection.ops.quote_name(name)
    typed = ", ".join(f"{connection.ops.quote_name(c)} {kind}" for c, kind in columns)
    with connection.cursor() as cursor:
        # Only our own table and type names are formatted in.
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {table} ({typed}) ON COMMIT DELETE ROWS"
        )
    copy_rows(name, columns, rows)
    names = ", ".join(connection.ops.quote_name(c) for c, _ in columns)
    return f"DELETE FROM {table} RETURNING {names}"  # noqa: S608


def row_source(types: Sequence[str], rows: Sequence[Row]) -> Iterator[tuple[str, list[Any]]]:
    """SQL yielding `rows`, with its parameters, for the plain path: on PostgreSQL one
    `unnest` of a few arrays whatever the number of rows (parsing 100,000 placeholders
    would take longer than the insert); elsewhere VALUES lists within the backend's
    parameter limit.
    """
    if connection.vendor == "postgresql":
        arrays = ", ".join(f"%s::{kind}[]" for kind in types)
        columns = [list(column) for column in zip(*rows, strict=True)]
        # Only our type names and placeholders are formatted in.
        yield f"SELECT * FROM unnest({arrays})", columns  # noqa: S608
        return
    per_query = (connection.features.max_query_params or 999) // len(types)
    placeholders = "(" + ", ".join(["%s"] * len(types)) + ")"
    for start in range(0, len(rows), per_query):
        part = rows[start : start + per_query]
        values = ", ".join([placeholders] * len(part))
        yield f"VALUES {values}", [value for row in part for value in row]


def insert_rows(table: str, columns: Sequence[Column], rows: Sequence[Row]) -> None:
    """Append rows to a table: one COPY, else INSERTs of `row_source`."""
    if not rows:
        return
    if copy_enabled():
        copy_rows(table, columns, rows)
        return
    names = ", ".join(connection.ops.quote_name(name) for name, _ in columns)
    with connection.cursor() as cursor:
        for source, params in row_source([kind for _, kind in columns], rows):
            # Only our own table and column names are formatted in.
            cursor.execute(
                f"INSERT INTO {connection.ops.quote_name(table)} ({names})"  # noqa: S608
                f" SELECT * FROM ({source}) AS batch",
                params,
            )


def insert_new_rows(
    table: str, columns: Sequence[Column], rows: Sequence[Row], *, returning: Sequence[str]
) -> list[Row]:
    """Insert the rows that no unique key of the table already holds, in column order (a lock
    order for concurrent writers); returns the `returning` columns of those inserted."""
    if not rows:
        return []
    quote = connection.ops.quote_name
    names = ", ".join(quote(name) for name, _ in columns)
    back = ", ".join(quote(name) for name in returning)
    order = ", ".join(str(at) for at in range(1, len(columns) + 1))
    if copy_enabled():
        taken = staged_rows(f"portal_new_{table}", columns, rows)
        sources: Iterable[tuple[str, str, list[Any] | None]] = [
            (f"WITH batch AS ({taken}) ", "batch", None)
        ]
    else:
        sources = (
            ("", f"({source}) AS batch", params)
            for source, params in row_source([k for _, k in columns], rows)
        )
    inserted: list[Row] = []
    with connection.cursor() as cursor:
        for prefix, source, params in sources:
            # SQLite needs the WHERE to read ON CONFLICT as an upsert, not a join. Only our own
            # table and column names are formatted in; values are parameters.
            cursor.execute(
                f"{prefix}INSERT INTO {quote(table)} ({names}) SELECT * FROM {source}"  # noqa: S608
                f" WHERE true ORDER BY {order} ON CONFLICT DO NOTHING RETURNING {back}",
                params,
            )
            inserted += cursor.fetchall()
    return inserted


def any_of(field: str, values: Collection[int]) -> "Q | AnyOf":
    """A filter for `field__in=values`: on PostgreSQL `field = ANY(array)` with the array one
    parameter, since thousands of placeholders cost more to build and parse than the query
    takes, and the planner reads an array as index look-ups where `IN (SELECT unnest(...))`
    may become a scan of the whole table."""
    if connection.vendor == "postgresql":
        return AnyOf(F(field), list(values))
    return Q(**{f"{field}__in": list(values)})


class AnyOf(Lookup):
    """`lhs = ANY(%s)`, the right-hand side a list passed as one array parameter."""

    lookup_name = "any_of"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs} = ANY(%s)", (*lhs_params, list(self.rhs))


def update_rows(table: str, columns: Sequence[Column], rows: Sequence[Row]) -> None:
    """Set columns[1:] of the rows whose columns[0] (a unique key) is each row's first value:
    one UPDATE from the rows staged by COPY, else from `row_source`.
    """
    if not rows:
        return
    quote = connection.ops.quote_name
    target = quote(table)
    key = quote(columns[0][0])
    names = ", ".join(quote(name) for name, _ in columns)
    assignments = ", ".join(f"{quote(c)} = batch.{quote(c)}" for c, _ in columns[1:])
    # In a transaction (no savepoint of its own): a commit between the COPY and the UPDATE
    # would empty the staging table.
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        if copy_enabled():
            taken = staged_rows(f"portal_rows_{table}", columns, rows)
            sources: Iterable[tuple[str, list[Any] | None]] = [(taken, None)]
        else:
            sources = row_source([kind for _, kind in columns], rows)
        for source, params in sources:
            # Only our own table and column names are formatted in; values are parameters.
            cursor.execute(
                f"WITH batch ({names}) AS ({source}) UPDATE {target} SET {assignments}"  # noqa: S608
                f" FROM batch WHERE {target}.{key} = batch.{key}",
                params,
            )


def bulk_update(model: type[Model], objects: Sequence[Model], fields: Sequence[str]) -> None:
    """Write these fields of these saved rows: COPY into a staging table and one UPDATE
    joined on the primary key; Django's `bulk_update` on the plain path.

    `bulk_update` builds a CASE of one WHEN per row for each field, which the database
    then tests row by row: its cost grows with the square of the rows, a second for a
    few thousand, which is what one poll of a thousand jobs writes.
    """
    if not objects:
        return
    if not copy_enabled():
        model._default_manager.bulk_update(objects, fields)
        return
    meta = model._meta
    chosen = [_concrete(meta.pk), *(_concrete(meta.get_field(name)) for name in fields)]
    columns = _columns(chosen)
    prepared = [_prepared(field) for field in chosen]
    rows = (
        tuple(prep(getattr(obj, f.attname)) for f, prep in zip(chosen, prepared, strict=True))
        for obj in objects
    )
    # One staging table per table and set of fields: each has its own columns.
    which = zlib.crc32(",".join(fields).encode())
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    assignments = ", ".join(f"{quote(c)} = batch.{quote(c)}" for c, _ in columns[1:])
    key = quote(columns[0][0])
    # In one transaction: a commit between the COPY and the UPDATE would empty the stage.
    with transaction.atomic(), connection.cursor() as cursor:
        taken = staged_rows(f"portal_update_{meta.db_table}_{which:08x}", columns, rows)
        # Only our own table and column names are formatted in.
        cursor.execute(
            f"WITH batch AS ({taken}) UPDATE {table} SET {assignments}"  # noqa: S608
            f" FROM batch WHERE {table}.{key} = batch.{key}"
        )


def bulk_insert(model: type[Model], objects: Sequence[Model]) -> None:
    """Insert new rows whose primary keys nobody reads back: one COPY, else `bulk_create`."""
    if not objects:
        return
    if not copy_enabled():
        model._default_manager.bulk_create(objects)
        return
    fields = [_concrete(f) for f in model._meta.concrete_fields if not f.primary_key]
    columns = _columns(fields)
    prepared = [_prepared(field) for field in fields]
    rows = (
        tuple(prep(f.pre_save(obj, True)) for f, prep in zip(fields, prepared, strict=True))
        for obj in objects
    )
    copy_rows(model._meta.db_table, columns, rows)


def _concrete(field: object) -> "Field[Any, Any]":
    if not isinstance(field, Field) or not field.column:
        raise TypeError(f"{field!r} is not a column of its table")
    return field


def _columns(fields: "Sequence[Field[Any, Any]]") -> list[Column]:
    """Each field's column name and PostgreSQL type."""
    return [(str(field.column), field.db_type(connection) or "text") for field in fields]


# Fields whose Python values COPY takes as they are (no call per value: a poll has
# tens of thousands); any other field's values go through Django's preparation.
_AS_IS = {
    "AutoField",
    "BigAutoField",
    "BigIntegerField",
    "BinaryField",
    "FloatField",
    "ForeignKey",
    "IntegerField",
    "PositiveBigIntegerField",
    "PositiveIntegerField",
    "PositiveSmallIntegerField",
    "SmallIntegerField",
}


def _prepared(field: "Field[Any, Any]") -> Callable[[Any], Any]:
    if field.get_internal_type() in _AS_IS:
        return _as_is
    return partial(field.get_db_prep_save, connection=connection)


def _as_is(value: Any) -> Any:
    return value
