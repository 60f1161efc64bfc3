"""Progress while waiting: a bar that updates in place in a notebook, a line elsewhere."""

import sys
import time
from typing import Any


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class Progress:
    """Shows a job's state, step and elapsed time; `update` redraws, `close` ends."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.notebook = _in_notebook()
        self.enabled = enabled if enabled is not None else True
        self.started = time.monotonic()
        self._handle: Any = None

    def text(self, name: str, state: str, step: float | None, total: int | None) -> str:
        elapsed = int(time.monotonic() - self.started)
        where = ""
        if step is not None:
            where = f" step {int(step)}" + (f"/{total}" if total else "")
        return f"{name}: {state}{where} ({elapsed // 60}:{elapsed % 60:02d})"

    def update(self, name: str, state: str, step: float | None, total: int | None) -> None:
        if not self.enabled:
            return
        line = self.text(name, state, step, total)
        if self.notebook:
            self._show_html(line, step, total)
        else:
            sys.stderr.write(f"\r{line}\x1b[K")
            sys.stderr.flush()

    def _show_html(self, line: str, step: float | None, total: int | None) -> None:
        from IPython.display import HTML, display  # type: ignore[import-not-found,unused-ignore]

        bar = ""
        if step is not None and total:
            bar = f'<progress value="{min(step, total):g}" max="{total}"></progress> '
        html = HTML(f"<div>{bar}<code>{_escape(line)}</code></div>")
        if self._handle is None:
            self._handle = display(html, display_id=True)
        else:
            self._handle.update(html)

    def close(self) -> None:
        if self.enabled and not self.notebook:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
