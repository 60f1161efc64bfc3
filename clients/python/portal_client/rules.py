"""A checkpoint retention rule as the API takes it (docs/checkpoints.md)."""

from typing import Any


def rule_body(
    *,
    keep_last: int | None,
    keep_best: int | None,
    best_metric: str,
    best_mode: str,
    older_than_days: float | None,
) -> dict[str, Any]:
    """The rule's fields; a field left None is sent empty (all empty: no rule)."""
    return {
        "keep_last": keep_last,
        "keep_best": keep_best,
        "best_metric": best_metric,
        "best_mode": best_mode,
        "older_than_days": older_than_days,
    }
