"""Compare's lineage: which run each compared run was forked from and at which step, and the
job settings (command, resources) that differ between them.

The runs' logged and given settings are compare's own table (`params`); these are the
job's spec fields, which a fork changes as often as its learning rate.
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from jobs.models import Job

# The spec fields compared, in the order a reader looks for them.
SPEC_FIELDS = (
    "command",
    "template",
    "nodes",
    "gpus_per_node",
    "cpus_per_task",
    "memory_mb",
    "time_limit",
    "partition",
    "setup",
)


@dataclass(frozen=True)
class Lineage:
    job: int
    name: str
    parent: int | None
    parent_name: str  # empty when the parent is in another project (not the viewer's to name)
    parent_step: int | None
    parent_compared: bool  # the parent is one of the compared runs


def _shown(value: Any) -> Any:
    if isinstance(value, timedelta):
        seconds = int(value.total_seconds())
        return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    return value


def compare_lineage(*, jobs: list[Job]) -> dict[str, Any]:
    """The compared runs' lineage (forks only) and differing spec fields (one query)."""
    ids = [job.pk for job in jobs]
    rows = {
        row["pk"]: row
        for row in Job.objects.filter(pk__in=ids).values(
            "pk",
            "name",
            "project_id",
            "parent_id",
            "parent_step",
            "parent__name",
            "parent__project_id",
            *SPEC_FIELDS,
        )
    }
    ordered = [rows[i] for i in ids if i in rows]
    lineage = [
        Lineage(
            job=row["pk"],
            name=row["name"],
            parent=row["parent_id"],
            parent_name=row["parent__name"]
            if row["parent__project_id"] == row["project_id"]
            else "",
            parent_step=row["parent_step"],
            parent_compared=row["parent_id"] in rows,
        )
        for row in ordered
        if row["parent_id"] is not None
    ]
    differ = [
        {"key": name, "values": [_shown(row[name]) for row in ordered]}
        for name in SPEC_FIELDS
        if len({str(row[name]) for row in ordered}) > 1
    ]
    return {"lineage": lineage, "spec_diff": differ}
