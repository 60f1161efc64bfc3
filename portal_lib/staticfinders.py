"""Serves Plotly.js from the pinned `plotly` package, so no asset comes from a CDN."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_JS = "plotly.min.js"
PREFIX = "vendor"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=Path(plotly.__file__).parent / "package_data")
        self.storage.prefix = PREFIX  # type: ignore[attr-defined]

    def find(  # type: ignore[override]  # one file; the overloads add nothing here
        self, path: str, find_all: bool = False, **kwargs: Any
    ) -> str | list[str]:
        if path != f"{PREFIX}/{PLOTLY_JS}":
            return [] if find_all or kwargs.get("all") else ""
        found = self.storage.path(PLOTLY_JS)
        return [found] if find_all or kwargs.get("all") else found

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        yield PLOTLY_JS, self.storage
