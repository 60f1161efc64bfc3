"""What the job page is told besides the data: its attempts, how each series is charted,
the progress it can show and the terms of its MFU.

The page follows the job, not one attempt: it gets every attempt's URLs (and a
template for attempts that start while it is open) and draws them as one run.
Which chart a series goes on is `monitoring.reading.kinds.series_kind`'s, the rule compare's
units read too, so the page never guesses.
"""

from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from jobs.enums import FINAL_STATES, State
from jobs.models import Attempt, Job
from jobs.rundir import STDOUT_FILE, page_formats
from monitoring.logs.store import log_tail
from monitoring.models import AttemptIngest, LogFile
from monitoring.reading.throughput import PRINTED_MFU
from monitoring.runs.plan import command_steps

# Reversed with this attempt number, then replaced by `{n}`: a URL template for the page.
_ANY_NUMBER = 987654321
BANNER_TAIL_LINES = 12
MAX_BANNER_LINE = 400
# Final states of an attempt that mean it failed (cancelled by its owner: not a failure).
FAILED_STATES = frozenset(FINAL_STATES) - {State.COMPLETED, State.CANCELLED}


def attempt_total_steps(*, job: Job, attempt_id: int | None) -> int | None:
    """The last step: the spec's, else the command's (`--steps 200`, the plan's reader), else
    what the log said (`[i/N]`, a tqdm bar's total)."""
    if job.total_steps:
        return int(job.total_steps)
    if found := command_steps(job.params or {}):
        return found[0]
    if attempt_id is None:
        return None
    state = (
        LogFile.objects.filter(attempt_id=attempt_id, name=STDOUT_FILE)
        .values_list("reader_state", flat=True)
        .first()
    )
    total = (state or {}).get("total_steps")
    return int(total) if isinstance(total, int) and total > 0 else None


def mfu_terms(*, job: Job, attempt_id: int | None) -> dict[str, Any]:
    """How the MFU shown was had: printed by the trainer, computed (with what), or what is missing.

    A trainer's own `mfu` is a series of the attempt's reader (`AttemptIngest.series_names`);
    the portal's (COMPUTED_MFU, its own series) is computed at ingest from a whole-job
    token rate, 6 x params FLOPs per token, and the cluster's dense BF16 peak, as a fraction.
    """
    printed = attempt_id is not None and any(
        PRINTED_MFU in names
        for names in AttemptIngest.objects.filter(attempt_id=attempt_id).values_list(
            "series_names", flat=True
        )
    )
    peak = job.cluster.gpu_peak_bf16_tflops
    if printed:
        return {"source": "printed"}
    missing = []
    if not job.model_params:
        missing.append("the model size (model parameters in the job spec)")
    if not peak:
        missing.append(f"the GPU peak of cluster {job.cluster.name} (set by staff)")
    if missing:
        return {"source": "missing", "missing": missing}
    return {
        "source": "computed",
        "peak_tflops": peak,
        "gpus": job.total_gpus,
        "model_params": job.model_params,
        "gpu_model": job.cluster.gpu_model,
    }


@dataclass(frozen=True)
class BannerLine:
    text: str
    diagnosed: bool = False  # the line the diagnosis quotes: the box opens on it


def banner_lines(*, attempt_id: int, diagnosis: dict[str, Any]) -> list[BannerLine]:
    """The last log lines a failure banner shows: the diagnosis's own, else the log's tail;
    the last one holding the diagnosis's evidence is marked."""
    if diagnosis.get("last_lines"):
        lines = [str(line) for line in diagnosis["last_lines"]]
    else:
        piece = log_tail(attempt_id=attempt_id, file=STDOUT_FILE, lines=BANNER_TAIL_LINES)
        text = piece.data.decode("utf-8", errors="replace").replace("\r\n", "\n")
        # A tqdm bar's redraws: its newest segment only; no line long enough to push the
        # fixes away.
        lines = [
            line.rsplit("\r", 1)[-1][:MAX_BANNER_LINE] for line in text.splitlines() if line.strip()
        ]
    evidence = str(diagnosis.get("evidence") or "").strip().split("\n", 1)[0][:MAX_BANNER_LINE]
    marked = max((i for i, line in enumerate(lines) if evidence and evidence in line), default=-1)
    return [BannerLine(line, i == marked) for i, line in enumerate(lines)]


def _url_template(name: str, job_id: int) -> str:
    url = reverse(name, kwargs={"job_id": job_id, "number": _ANY_NUMBER})
    return url.replace(str(_ANY_NUMBER), "{n}")


def attempt_rows(attempts: list[Attempt]) -> list[dict[str, Any]]:
    """What the page knows of each attempt when it loads (live ones come in deltas)."""
    return [
        {
            "number": a.number,
            "state": a.state,
            "startedAt": a.started_at.isoformat() if a.started_at else None,
            "endedAt": a.ended_at.isoformat() if a.ended_at else None,
            "nodes": a.node_list,
        }
        for a in attempts
    ]


def job_page_config(*, job: Job, attempts: list[Attempt]) -> dict[str, Any]:
    """The page's json_script: its attempts, URL templates, formats, progress and MFU terms."""
    latest = attempts[-1] if attempts else None
    latest_id = latest.pk if latest else None
    return {
        "job": job.pk,
        "jobState": job.state,
        "nodes": job.nodes,
        "attempts": attempt_rows(attempts),
        "attempt": latest.number if latest else 1,
        "urls": {
            "log": _url_template("attempt-log", job.pk),
            "download": _url_template("attempt-log-download", job.pk),
            "series": _url_template("attempt-series-names", job.pk),
            "events": reverse("api-job-events", kwargs={"job_id": job.pk}),
            "failures": reverse("job-failures", kwargs={"job_id": job.pk}),
        },
        "wsUrl": f"/ws/jobs/{job.pk}/",
        # File and series names the page matches, from the one module that defines them.
        "formats": page_formats(),
        "totalSteps": attempt_total_steps(job=job, attempt_id=latest_id),
        "specTotalSteps": job.total_steps,
        "mfu": mfu_terms(job=job, attempt_id=latest_id),
        "failedStates": sorted(FAILED_STATES),
        "finalStates": sorted(FINAL_STATES),
    }
