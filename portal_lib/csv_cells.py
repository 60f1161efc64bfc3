"""The CSV the portal writes: no text cell that a spreadsheet would run as a formula.

Names in a CSV come from people (metric names a job printed, project slugs,
usernames), and a cell such as `=HYPERLINK(...)` is a formula to Excel and
LibreOffice. OWASP's rule: a text cell starting with = + - @ tab or carriage
return gets a leading single quote. Numbers are written as they are.
"""

import csv
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """The value as a cell: text that starts like a formula quoted, anything else as is."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class SafeCsvWriter:
    """`csv.writer` whose every text cell goes through `csv_cell`: the one way to write CSV."""

    def __init__(self, out: Any, **options: Any) -> None:
        self._writer = csv.writer(out, **options)

    def writerow(self, row: Iterable[object]) -> None:
        self._writer.writerow([csv_cell(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        for row in rows:
            self.writerow(row)
