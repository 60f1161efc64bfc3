"""Plan a bigger run from a finished smaller one: its time, GPU-hours and cost. No queries.

Measure a small run, then estimate the large one. A finished run's summary gives its
whole-job throughput (tokens, samples or steps per second, so per GPU by dividing by its
GPUs) and the time one of its steps takes: its units per step (a cumulative count over
its step, or its rate over its step rate) over its throughput, else its run time over its
steps. The target runs at that per-GPU throughput times a scaling efficiency, which the
user gives or two runs of the same code at two sizes measure (per-GPU throughput at the
larger over at the smaller). GPU-hours, cost and the quota's answer are the submit form's
own (jobs.estimate on the target with the planned time as its time limit).

Two ways to grow: the global batch stays (each step's work is shared by more GPUs, so a
step is faster) or each GPU's batch stays (a step is as fast, less the efficiency, and
does more work). Where the numbers are missing the plan says so rather than guess.
"""

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from jobs.estimate import Estimate, Room, request_estimate
from jobs.models import Job
from jobs.queue.waits import format_wait
from monitoring.models import RunSummary
from monitoring.reading.throughput import SAMPLE_COUNT_NAMES, STEP_RATE_NAMES, TOKEN_COUNT_NAMES
from monitoring.runs.summary import LOSS_NAMES
from projects.quota import QuotaRequest, limit_errors

GLOBAL_BATCH = "global"  # the global batch stays: more GPUs share each step
PER_GPU_BATCH = "per_gpu"  # each GPU's batch stays: a step does more work
BATCH_CHOICES = ((GLOBAL_BATCH, "global batch kept"), (PER_GPU_BATCH, "per-GPU batch kept"))
# Command flags that name a run's last step, in the order the plan reads them.
# Epochs are not steps: a flag that counts them is no last step.
STEP_KEYS = (
    "total_steps",
    "max_steps",
    "num_train_steps",
    "steps",
    "num_steps",
    "train_steps",
    "max_iters",
)
_COUNTS = {"tokens": TOKEN_COUNT_NAMES, "samples": SAMPLE_COUNT_NAMES}


class CannotPlan(ValueError):
    """No honest plan can be made; the message says what is missing and what to do."""


@dataclass(frozen=True)
class Measured:
    """What a finished run measured: the base of a plan."""

    job_id: int
    gpus: int
    throughput: float  # the whole job's, units per second
    unit: str  # tokens, samples or steps
    steps: int | None  # the last step it reported
    units_per_step: float | None
    duration_seconds: float | None  # its attempts' run time

    @property
    def per_gpu(self) -> float:
        return self.throughput / self.gpus

    def step_time(self) -> tuple[float, str]:
        """Seconds per step, and how they were found."""
        if self.units_per_step is not None:
            basis = (
                f"{_figure(self.units_per_step)} {self.unit} per step at "
                f"{_figure(self.throughput)} {self.unit}/s"
            )
            return self.units_per_step / self.throughput, basis
        if self.steps and self.duration_seconds:
            basis = "its run time over its steps (start-up included, so on the safe side)"
            return self.duration_seconds / self.steps, basis
        raise CannotPlan(
            f"Job #{self.job_id} reported its throughput but no step numbers or step rate, "
            "so the time a step takes is unknown: log the step with the metrics."
        )


def measured_run(*, job: Job, summary: RunSummary | None) -> Measured:
    """The job's measurements, or CannotPlan saying why there are none to plan from."""
    if not job.is_finished:
        raise CannotPlan(
            f"Job #{job.pk} has not finished ({job.get_state_display()}): plan from a "
            "finished run, whose throughput is measured."
        )
    if summary is None or not summary.throughput or summary.throughput <= 0:
        raise CannotPlan(
            f"Job #{job.pk} reported no throughput (tokens/s, samples/s or steps/s), so "
            "there is nothing to scale from: print one, e.g. samples_per_sec=512."
        )
    stats = summary.metrics or {}
    unit = summary.throughput_unit or "steps"
    units_per_step: float | None = 1.0 if unit == "steps" else None
    for name in _COUNTS.get(unit, ()):
        last, _, _, step = stats.get(name) or (0.0, 0.0, 0.0, 0.0)
        if units_per_step is None and last > 0 and step > 0:
            units_per_step = last / step
    for name in STEP_RATE_NAMES:
        rate = (stats.get(name) or [0.0])[0]
        if units_per_step is None and rate > 0:
            units_per_step = summary.throughput / rate
    stepped = [stats[n][3] for n in (*LOSS_NAMES, *_COUNTS.get(unit, ())) if n in stats]
    return Measured(
        job_id=job.pk,
        gpus=job.total_gpus,
        throughput=summary.throughput,
        unit=unit,
        steps=int(max(stepped)) if stepped and max(stepped) >= 1 else None,
        units_per_step=units_per_step,
        duration_seconds=summary.duration_seconds,
    )


@dataclass(frozen=True)
class Efficiency:
    value: float  # the target's per-GPU throughput over the measured run's, (0, 1]
    source: str  # given, measured or same size
    note: str


def efficiency_measured(one: Measured, other: Measured) -> float:
    """Per-GPU throughput at the larger of two runs over at the smaller."""
    if one.unit != other.unit:
        raise CannotPlan(
            f"Jobs #{one.job_id} and #{other.job_id} report throughput in different units "
            f"({one.unit}, {other.unit}): give an efficiency."
        )
    if one.gpus == other.gpus:
        raise CannotPlan("Two runs at the same size measure no scaling: give an efficiency.")
    small, large = sorted((one, other), key=lambda run: run.gpus)
    return large.per_gpu / small.per_gpu


def efficiency_for(
    *, measured: Measured, gpus: int, given: float | None, other: Measured | None
) -> Efficiency:
    """The user's efficiency, else none needed (no more GPUs), else one measured, else refuse."""
    if given is not None:
        if not 0 < given <= 1:
            raise CannotPlan(
                "Give the scaling efficiency as a number above 0 and at most 1, e.g. 0.9."
            )
        return Efficiency(given, "given", "as you gave it")
    if gpus <= measured.gpus:
        return Efficiency(
            1.0, "same size", f"no more GPUs than job #{measured.job_id}: its per-GPU rate"
        )
    if other is None:
        raise CannotPlan(
            f"From {measured.gpus} to {gpus} GPUs needs a scaling efficiency: give one (0.9: "
            "each GPU keeps 90 % of its measured throughput), or run the same code at "
            "another size to measure it."
        )
    value = efficiency_measured(measured, other)
    small, large = sorted((measured, other), key=lambda run: run.gpus)
    note = (
        f"measured: {_figure(small.per_gpu)} {small.unit}/s per GPU at {small.gpus} GPUs "
        f"(job #{small.job_id}), {_figure(large.per_gpu)} at {large.gpus} (job #{large.job_id})"
    )
    if value > 1:
        note += f"; {value:.2f} capped at 1"
    return Efficiency(min(value, 1.0), "measured", note)


@dataclass(frozen=True)
class Plan:
    measured: Measured
    gpus: int
    steps: int
    batch: str
    efficiency: Efficiency
    measured_step_seconds: float
    step_seconds: float  # the target's
    throughput: float  # the target's, whole job, units per second
    duration: timedelta  # whole seconds, rounded up
    basis: str  # how the measured step time was found
    estimate: Estimate  # GPU-hours and cost of the planned time, against the budgets
    limit: str  # a per-job limit the planned run breaks; empty if none
    short_limit: str  # the entered time limit is shorter than the plan; empty if not

    @property
    def fits(self) -> bool:
        return self.estimate.fits and not self.limit


def run_plan(
    *,
    measured: Measured,
    request: QuotaRequest,
    steps: int,
    batch: str,
    efficiency: Efficiency,
    room: Room,
) -> Plan:
    """The target `request` (GPUs, nodes, CPUs; its time limit is replaced) run for `steps`."""
    if steps < 1:
        raise CannotPlan("Give the number of steps to plan for: the last step, in Monitoring.")
    if batch not in (GLOBAL_BATCH, PER_GPU_BATCH):
        raise CannotPlan("Choose whether the global batch or each GPU's batch stays.")
    gpus, e = request.gpus, efficiency.value
    measured_step, basis = measured.step_time()
    # Global batch kept: a step's work is spread over G2 GPUs at e x the measured per-GPU rate.
    step_seconds = measured_step / e
    if batch == GLOBAL_BATCH:
        step_seconds = measured_step * measured.gpus / (gpus * e)
    # Rounded first: 20,000 x 0.04 s is 800.0000000000001 in floats, and 800 s by hand.
    duration = timedelta(seconds=math.ceil(round(steps * step_seconds, 6)))
    planned = dataclasses.replace(request, time_limit=duration)
    estimate = request_estimate(request=planned, room=room)
    limits = limit_errors(gpus=gpus, time_limit=duration, quota=room.quota) if room.quota else {}
    short = ""
    if request.time_limit < duration:
        short = (
            f"The time limit entered ({format_wait(request.time_limit)}) is shorter than the "
            f"planned {format_wait(duration)}: the run would stop before step {steps}."
        )
    return Plan(
        measured=measured,
        gpus=gpus,
        steps=steps,
        batch=batch,
        efficiency=efficiency,
        measured_step_seconds=measured_step,
        step_seconds=step_seconds,
        throughput=measured.per_gpu * e * gpus,
        duration=duration,
        basis=basis,
        estimate=estimate,
        limit=next(iter(limits.values()))[0] if limits else "",
        short_limit=short,
    )


def command_steps(params: Mapping[str, object]) -> tuple[int, str] | None:
    """The last step a run's settings give (`--steps 200`, `--max-steps 500`) and the
    setting's name as the command wrote it, if any."""
    for key in STEP_KEYS:
        for name in (key, key.replace("_", "-")):
            value = params.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 1:
                return int(value), name
    return None


def target_steps(
    *, given: int | None, params: dict[str, object], measured: Measured
) -> tuple[int, str]:
    """The steps to plan for and where they came from: the form, the command, the run."""
    if given:
        return given, "the last step entered"
    if found := command_steps(params):
        return found[0], f"the command's --{found[1]}"
    if measured.steps:
        return measured.steps, f"as many as job #{measured.job_id} ran"
    raise CannotPlan("Give the number of steps to plan for: the last step, in Monitoring.")


def _figure(value: float) -> str:
    """1,234 or 0.128: enough digits to check by hand."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
