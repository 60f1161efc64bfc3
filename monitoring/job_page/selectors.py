"""Reads for the live job page: where its data stands (who may see it: jobs.access)."""

import dataclasses
from collections import defaultdict
from typing import Any

from clusters.avoidance import submission_avoidances
from jobs.models import Attempt, Job
from monitoring.checkpoints.chosen import Saved, line_point
from monitoring.checkpoints.registry import job_checkpoints
from monitoring.diagnosis.diagnose import Diagnosis
from monitoring.hangs.selectors import job_hangs
from monitoring.hangs.stragglers import StragglerPolicy, attempt_stragglers
from monitoring.models import LogFile
from monitoring.series.read import last_points


def job_live_state(*, job_id: int) -> dict[str, Any]:
    """Where a job's live data stands, for a page that connects late (four queries).

    Per attempt: its state, the size of each followed log file and the last x
    of each series, so the page knows which deltas are new and what to backfill.
    Plain queries rather than array subqueries, so SQLite (a local run) works too.
    """
    state = Job.objects.filter(pk=job_id).values_list("state", flat=True).first()
    attempts = list(
        Attempt.objects.filter(job_id=job_id).order_by("number").values("pk", "number", "state")
    )
    sizes: dict[int, dict[str, int]] = defaultdict(dict)
    for attempt_id, name, size in LogFile.objects.filter(attempt__job_id=job_id).values_list(
        "attempt_id", "name", "size"
    ):
        sizes[attempt_id][name] = size
    heads = last_points(attempt_ids=[row["pk"] for row in attempts])
    last_xs = {
        attempt_id: {name: x for name, (x, _) in points.items()}
        for attempt_id, points in heads.items()
    }
    return {
        "job": job_id,
        "state": state,
        "attempts": [
            {
                "attempt": row["number"],
                "state": row["state"],
                "log_sizes": sizes[row["pk"]],
                "series_last_x": last_xs.get(row["pk"], {}),
            }
            for row in attempts
        ],
    }


def job_failures(*, job: Job, policy: StragglerPolicy | None = None) -> dict[str, Any]:
    """What the job page and the API show of failures: each ended attempt's diagnosis, the
    checkpoints with the one a resume would use, the live attempt's stragglers, and hangs."""
    attempts = list(Attempt.objects.filter(job_id=job.pk).order_by("number"))
    for attempt in attempts:
        attempt.job = job  # the stragglers check reads job.nodes: no query per attempt
    latest = attempts[-1] if attempts else None
    diagnosed = [
        {
            "attempt": a.number,
            "state": a.state,
            "exit_code": a.exit_code,
            "node_list": a.node_list,
            "resume_from": a.resume_from,
            "excluded_nodes": [n for n in a.excluded_nodes.split(",") if n],
            "failure_class": a.failure_class,
            # Every field, also for a diagnosis stored before a field was added.
            "diagnosis": Diagnosis.from_json(a.diagnosis).as_json(),
        }
        for a in attempts
        if a.diagnosis
    ]
    checkpoints = job_checkpoints(job_id=job.pk)
    # Where a restart of the latest attempt would resume: its own line (after a resume by
    # hand or a fork, not always the job's newest checkpoint).
    saved = [
        Saved(c.attempt, c.step, c.path) for c in checkpoints if c.complete and c.step is not None
    ]
    resume_from, _ = line_point(attempt=latest, saved=saved) if latest else ("", None)
    checkpoints = [dataclasses.replace(c, resume=c.path == resume_from) for c in checkpoints]
    avoided = submission_avoidances(attempt_uuids=[a.uuid for a in attempts])
    return {
        "diagnoses": diagnosed,
        "checkpoints": checkpoints,
        "resume_from": resume_from,
        "stragglers": attempt_stragglers(attempt=latest, policy=policy) if latest else [],
        "hangs": job_hangs(attempts=attempts),
        # Per attempt, the cluster's avoided nodes its submission left out, and why.
        "avoided_nodes": [
            {
                "attempt": a.number,
                "nodes": [{"node": n, "reason": r} for n, r in avoided[a.uuid].nodes.items()],
                "kept_note": avoided[a.uuid].kept_note,
            }
            for a in attempts
            if a.uuid in avoided and (avoided[a.uuid].nodes or avoided[a.uuid].kept_note)
        ],
        "attempt": latest.number if latest else None,
    }
