"""The sweep's heartbeat: follow running trials, prune losers, finish ended ones, start more.

A trial whose metric diverges (`sweeps.divergence`) is pruned as diverged before anything
else, running or ended: its value would mislead the sampler and the charts.

The pruner is asked only about a job still running short of its last step: the tick sees
the job a poll late, so a job that has finished, or logged its last step, completes
whatever the pruner would say; and a pruned trial whose job completed all the same (its
last step unknown to the portal, the cancel too late) completes when that end is seen.

One tick per sweep at a time: the sweep's row is locked for the tick (`skip_locked`, so a
second worker passes it by), and a trial's row and its job commit together, so a worker
killed mid-tick leaves either both or neither. Everything is read back from the rows on
the next tick (`sweeps.study`), so nothing lives in memory between ticks.
"""

import logging
import math

from django.db import transaction
from django.utils import timezone

from clusters.errors import ClusterError
from jobs.code.snapshots import git_snapshot
from jobs.enums import FINAL_STATES, State
from jobs.errors import JobError
from jobs.models import Attempt, Job
from jobs.services import job_submit
from monitoring.job_page.facts import attempt_total_steps
from monitoring.runs.plan import command_steps
from monitoring.series.read import SeriesData, series_last, series_read
from portal_lib.errors import PortalError
from sweeps.divergence import Divergence, divergence
from sweeps.models import Sweep, Trial
from sweeps.services import trial_job_cancel, trial_spec
from sweeps.study import intermediate_of, prune_check, suggest

logger = logging.getLogger(__name__)

# Points read per trial and tick; a trial logs far fewer between two ticks.
MAX_POINTS = 5000
LIVE_SWEEPS = (Sweep.State.RUNNING, Sweep.State.PAUSED)


def sweeps_tick() -> int:
    """Advance every running or paused sweep once; how many this worker advanced."""
    ids = list(Sweep.objects.filter(state__in=LIVE_SWEEPS).values_list("pk", flat=True))
    advanced = 0
    for sweep_id in ids:
        try:
            advanced += sweep_advance(sweep_id=sweep_id)
        except Exception:
            # One sweep's failure (its tick rolled back whole) must not stop the others'.
            logger.exception("sweep %s: the tick failed; the next one tries again", sweep_id)
    return advanced


def sweep_advance(*, sweep_id: int) -> bool:
    """One tick of one sweep; False when another worker holds it or it has ended."""
    with transaction.atomic():
        sweep = (
            Sweep.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("project", "cluster", "user")
            .filter(pk=sweep_id, state__in=LIVE_SWEEPS)
            .first()
        )
        if sweep is None:
            return False
        trials = list(sweep.trials.select_related("job").order_by("number"))
        for trial in trials:
            if trial.state == Trial.State.RUNNING:
                _follow(sweep, trials, trial)
        # The sweep is not done while a pruned trial's job (this tick's too) has to end.
        settling = False
        for trial in trials:
            if trial.state == Trial.State.PRUNED:
                settling |= _settle_pruned(sweep, trial)
        if sweep.state == Sweep.State.RUNNING:
            _start_trials(sweep, trials)
        running = settling or any(t.state == Trial.State.RUNNING for t in trials)
        if len(trials) >= sweep.max_trials and not running:
            sweep.state = Sweep.State.DONE
        sweep.ticked_at = timezone.now()
        sweep.save(update_fields=["state", "message", "ticked_at"])
    return True


def _latest_attempt(trial: Trial) -> Attempt | None:
    if trial.job_id is None:
        return None
    return Attempt.objects.filter(job_id=trial.job_id).order_by("-number").first()


def _new_points(sweep: Sweep, trial: Trial, attempt: Attempt) -> SeriesData:
    """The metric's points past the last step reported."""
    last = trial.last_step
    return series_read(
        attempt_id=attempt.pk,
        name=sweep.metric,
        x_from=None if last is None else last + 1,
        max_points=MAX_POINTS,
    )


def _reported(sweep: Sweep, data: SeriesData) -> dict[int, float]:
    """The metric at each multiple of `report_every`."""
    return {
        int(x): y
        for x, y in zip(data.xs, data.ys, strict=True)
        if x == int(x) and x > 0 and int(x) % sweep.report_every == 0
    }


def _last_step(job: Job, attempt: Attempt) -> int | None:
    """The job's last step where the portal can know it: its spec's, its command's
    `--steps`-like flag, or the total its log printed."""
    if job.total_steps:
        return int(job.total_steps)
    if found := command_steps(job.params or {}):
        return found[0]
    return attempt_total_steps(job=job, attempt_id=attempt.pk)


def _prunable(job: Job, attempt: Attempt, data: SeriesData) -> bool:
    """Whether pruning can still stop the job: it is running and short of its last step.

    A job that left RUNNING (completing, ended, or out of the portal's sight) or that
    logged its last step has done its work; it completes, whatever the pruner says.
    """
    if attempt.state != State.RUNNING:
        return False
    last = _last_step(job, attempt)
    return last is None or max(data.xs, default=0.0) < last


def _follow(sweep: Sweep, trials: list[Trial], trial: Trial) -> None:
    if trial.job_id is None:
        trial.state = Trial.State.FAILED
        trial.note = "Its job was deleted."
        trial.ended_at = timezone.now()
        trial.save(update_fields=["state", "note", "ended_at"])
        return
    attempt = _latest_attempt(trial)
    if attempt is None:
        return
    ended = attempt.state in FINAL_STATES and trial.job is not None
    if ended and attempt.state == State.COMPLETED and not attempt.files_complete:
        return  # the poll has not read its output to the end yet
    data = _new_points(sweep, trial, attempt)
    new = _reported(sweep, data)
    if (found := _divergence(sweep, trial, data)) is not None:
        _prune_diverged(sweep, trial, found, new)
        return
    if ended:
        trial.intermediate = {**trial.intermediate, **{str(s): v for s, v in new.items()}}
        _finish(sweep, trial, attempt)
        return
    if not new:
        return
    if trial.job is None or not _prunable(trial.job, attempt, data):
        trial.intermediate = {**trial.intermediate, **{str(s): v for s, v in new.items()}}
        trial.save(update_fields=["intermediate"])
        return
    check = prune_check(sweep, trials, trial, new)
    kept = {s: v for s, v in new.items() if check.step is None or s <= check.step}
    trial.intermediate = {**trial.intermediate, **{str(s): v for s, v in kept.items()}}
    trial.system_attrs = check.system_attrs
    fields = ["intermediate", "system_attrs"]
    if check.pruned:
        value = kept[check.step] if check.step is not None else None
        trial.state = Trial.State.PRUNED
        trial.note = f"Pruned at step {check.step}: {sweep.metric} {value:.6g}."
        trial.ended_at = timezone.now()
        fields += ["state", "note", "ended_at"]
        trial_job_cancel(trial, reason=f"Pruned by sweep {sweep.name}: {trial.note}")
    trial.save(update_fields=fields)


def _divergence(sweep: Sweep, trial: Trial, data: SeriesData) -> Divergence | None:
    """Whether the metric's new points (every one read, not only the reported) diverged."""
    points = [*zip(data.xs, data.ys, strict=True), *((x, math.nan) for x in data.nonfinite)]
    return divergence(
        history=intermediate_of(trial).values(),
        points=points,
        maximize=sweep.direction == Sweep.Direction.MAXIMIZE,
    )


def _prune_diverged(sweep: Sweep, trial: Trial, found: Divergence, new: dict[int, float]) -> None:
    """Prune the trial as diverged and cancel its job if it still runs; only the reports
    before the divergence are kept (a pruned trial is drawn at its last one)."""
    kept = {str(s): v for s, v in new.items() if s < found.step}
    trial.intermediate = {**trial.intermediate, **kept}
    trial.state = Trial.State.PRUNED
    trial.diverged = True
    trial.note = found.note(sweep.metric)
    trial.ended_at = timezone.now()
    trial_job_cancel(trial, reason=f"Pruned by sweep {sweep.name}: {trial.note}")
    trial.save(update_fields=["intermediate", "state", "diverged", "note", "ended_at"])


def _settle_pruned(sweep: Sweep, trial: Trial) -> bool:
    """Complete a pruned trial whose job completed all the same; True until its job ended.

    The cancel reaches Slurm a poll or two after the step it was decided at; a job that
    ended before it (its last step unknown to the portal) completed, and so does its
    trial. A cancelled job ends CANCELLED, so its trial stays pruned. One query, only
    for a trial whose job completed.
    """
    job = trial.job
    if job is None or (job.state in FINAL_STATES and job.state != State.COMPLETED):
        return False
    if trial.diverged:  # its value means nothing, however its job ended
        return job.state not in FINAL_STATES
    if job.state != State.COMPLETED:
        return True  # the cancel has still to end it
    attempt = _latest_attempt(trial)
    if attempt is None or attempt.state != State.COMPLETED:
        return False
    if not attempt.files_complete:
        return True  # the poll has not read its output to the end yet
    new = _reported(sweep, _new_points(sweep, trial, attempt))
    trial.intermediate = {**trial.intermediate, **{str(s): v for s, v in new.items()}}
    trial.note = "Its job completed before the pruning could stop it."
    _finish(sweep, trial, attempt)
    return False


def _finish(sweep: Sweep, trial: Trial, attempt: Attempt) -> None:
    trial.ended_at = timezone.now()
    last = series_last(attempt_ids=[attempt.pk], names=[sweep.metric]).get(
        (attempt.pk, sweep.metric)
    )
    if attempt.state != State.COMPLETED:
        trial.state = Trial.State.FAILED
        trial.note = f"The job ended {attempt.get_state_display().lower()}."
    elif last is None:
        trial.state = Trial.State.FAILED
        trial.note = f"The job completed without reporting {sweep.metric}."
    elif not math.isfinite(last[1]):  # its last value a gap (NaN): no value to complete with
        _prune_diverged(sweep, trial, Divergence(int(last[0]), last[1], None), {})
        return
    else:
        trial.state = Trial.State.COMPLETE
        trial.value = last[1]
    trial.save(update_fields=["intermediate", "state", "note", "value", "ended_at"])


def _code_ready(sweep: Sweep) -> bool:
    """Fetch the sweep's git URL into its snapshot once, before its first trial, so that
    every trial runs the same bytes however the branch moves; a failed fetch stops it."""
    if sweep.code_id is not None or not sweep.code_git_url:
        return True
    try:
        fetched = git_snapshot(
            user=sweep.user, project=sweep.project, url=sweep.code_git_url, ref=sweep.code_git_ref
        )
    except JobError as exc:
        sweep.state = Sweep.State.STOPPED
        sweep.message = f"The sweep stopped before its first trial: {exc.message}"
        return False
    for field, value in fetched.items():
        setattr(sweep, field, value)
    sweep.save(update_fields=list(fetched))
    return True


def _start_trials(sweep: Sweep, trials: list[Trial]) -> None:
    running = sum(1 for t in trials if t.state == Trial.State.RUNNING)
    sweep.message = ""
    if running >= sweep.max_concurrent or len(trials) >= sweep.max_trials:
        return
    if not _code_ready(sweep):
        return
    while running < sweep.max_concurrent and len(trials) < sweep.max_trials:
        number = len(trials)
        suggestion = suggest(sweep, trials)
        spec = trial_spec(sweep, number=number, params=suggestion.params, nodes=suggestion.nodes)
        try:
            with transaction.atomic():
                job = job_submit(
                    user=sweep.user, project=sweep.project, cluster=sweep.cluster, spec=spec
                )
                trial = Trial.objects.create(
                    sweep=sweep,
                    number=number,
                    params=suggestion.params,
                    nodes=suggestion.nodes,
                    job=job,
                    system_attrs=suggestion.system_attrs,
                )
        except PortalError as exc:
            # A full quota or a busy queue: tried again next tick, said on the sweep's page.
            sweep.message = f"Trial {number} could not start: {exc.message}"
            logger.info("sweep %s: %s", sweep.pk, sweep.message)
            return
        except ClusterError as exc:
            # Reading the cluster's partitions failed; its words name hosts: logged, not shown.
            sweep.message = f"Trial {number} could not start: the cluster did not answer."
            logger.warning("sweep %s: trial %s could not start: %s", sweep.pk, number, exc)
            return
        trials.append(trial)
        running += 1
