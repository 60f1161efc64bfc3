"""The largest integers the portal takes from people: its PostgreSQL columns' ranges.

Every integer a form, serializer or query parameter accepts has a maximum at or
below one of these, so an oversized number is a 400 naming the field, never a
database error.
"""

INT_MAX = 2**31 - 1  # integer columns (IntegerField, PositiveIntegerField)
BIGINT_MAX = 2**63 - 1  # bigint columns (BigIntegerField): byte offsets, sizes
