"""The submit form's live preview, with the plan from a measured run when the form has one.

The form (web.jobs.views) posts everything to one endpoint; its errors, script and estimate
are web.jobs.views.form_preview's, and with `plan_from` (a finished job, the "Plan a bigger
run" link) this adds what the run being entered would take at that job's measured
throughput (monitoring.runs.plan); always, what past runs of the same command say of its
time limit and GPUs (monitoring.runs.sizing). Routed here because the measurements are
monitoring's.
"""

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_POST

from jobs.access import job_for_viewer, jobs_visible_to
from jobs.enums import FINAL_STATES
from jobs.estimate import spec_request
from jobs.models import Job
from jobs.preview import amount_text
from jobs.queue.waits import format_wait
from monitoring.models import RunSummary
from monitoring.runs.plan import (
    BATCH_CHOICES,
    GLOBAL_BATCH,
    CannotPlan,
    Measured,
    Plan,
    efficiency_for,
    measured_run,
    run_plan,
    target_steps,
)
from monitoring.runs.sizing import Sizing, gpu_shape, past_runs, sizing
from web.auth import request_user
from web.jobs.forms import format_time_limit
from web.jobs.views import FormPreview, form_preview

OTHER_SIZES = 50  # the newest runs of the same code looked at for a measured efficiency


class PlanInputs(forms.Form):
    plan_from = forms.IntegerField(min_value=1, label="Job to plan from")
    # efficiency_for says what is allowed
    plan_efficiency = forms.FloatField(required=False, label="Scaling efficiency")
    plan_batch = forms.ChoiceField(choices=BATCH_CHOICES, required=False, label="Batch")


@login_required
@require_POST
def job_preview(request: HttpRequest) -> JsonResponse:
    """Errors by field, the batch script, the estimate, the sizing from past runs and, with
    `plan_from`, the plan."""
    preview = form_preview(request)
    preview.payload["sizing"] = sizing_payload(request, preview)
    if "plan_from" in request.POST:
        preview.payload["plan"] = plan_payload(request, preview)
    return JsonResponse(preview.payload)


def sizing_payload(request: HttpRequest, preview: FormPreview) -> dict[str, Any]:
    """What past runs of the command say, or {"ok": False, "message": why nothing} (one query)."""
    spec, project = preview.spec, preview.project
    if spec is None or project is None or not spec.command.strip():
        return {"ok": False, "message": ""}
    history = past_runs(
        project_id=project.pk,
        project=project.slug,
        user_id=request_user(request).pk,
        template=spec.template,
        command=spec.command,
        now=timezone.now(),
    )
    found = sizing(
        history=history, time_limit=spec.time_limit, gpus=spec.nodes * spec.gpus_per_node
    )
    return sizing_json(
        found, nodes=spec.nodes, gpus_per_node=spec.gpus_per_node, time_limit=spec.time_limit
    )


def sizing_json(
    found: Sizing, *, nodes: int, gpus_per_node: int, time_limit: timedelta
) -> dict[str, Any]:
    """The sizing as the form shows it: each suggestion with the field values it would set,
    and whether the time limit asked is already the suggested one."""
    if found.message or found.time_limit is None:
        return {"ok": False, "runs": found.runs, "message": found.message}
    gpus = None
    if found.gpus is not None:
        shape = gpu_shape(total=found.gpus, gpus_per_node=gpus_per_node)
        if shape[0] * shape[1] < nodes * gpus_per_node:
            total = shape[0] * shape[1]
            gpus = {
                "nodes": shape[0],
                "gpus_per_node": shape[1],
                "text": f"{total} GPU{'s' if total != 1 else ''}",
            }
    return {
        "ok": True,
        "runs": found.runs,
        "mine": found.mine,
        "basis": found.basis,
        "time_limit": {
            "value": format_time_limit(found.time_limit),
            "text": format_wait(found.time_limit),
            "seconds": int(found.time_limit.total_seconds()),
            "asked": found.time_limit == time_limit,
        },
        "p95_seconds": int(found.p95.total_seconds()) if found.p95 else None,
        "gpus": gpus,
        "facts": list(found.facts),
        "warnings": [{"kind": w.kind, "text": w.text} for w in found.warnings],
    }


def plan_payload(request: HttpRequest, preview: FormPreview) -> dict[str, Any]:
    """The plan as the form shows it, or {"ok": False, "message": why there is none}."""
    inputs = PlanInputs(request.POST)
    if not inputs.is_valid():
        field, messages = next(iter(inputs.errors.items()))
        return {
            "ok": False,
            "message": f"{inputs.fields[field].label}: {' '.join(map(str, messages))}",
        }
    job = job_for_viewer(user=request.user, job_id=inputs.cleaned_data["plan_from"])
    if job is None:
        return {"ok": False, "message": "No such job to plan from, or not one of your projects'."}
    spec, project, cluster, room = preview.spec, preview.project, preview.cluster, preview.room
    if spec is None or project is None or cluster is None or room is None:
        return {"ok": False, "job": job.pk, "message": "Fix the fields marked in red first."}
    given = inputs.cleaned_data["plan_efficiency"]
    try:
        measured = measured_run(job=job, summary=RunSummary.objects.filter(job=job).first())
        target = spec_request(project=project, cluster=cluster, spec=spec)
        steps, steps_from = target_steps(
            given=spec.total_steps, params=spec.job_fields()["params"], measured=measured
        )
        other = None
        if given is None and target.gpus > measured.gpus:
            other = other_size(request=request, job=job, measured=measured, gpus=target.gpus)
        plan = run_plan(
            measured=measured,
            request=target,
            steps=steps,
            batch=inputs.cleaned_data["plan_batch"] or GLOBAL_BATCH,
            efficiency=efficiency_for(
                measured=measured, gpus=target.gpus, given=given, other=other
            ),
            room=room,
        )
    except CannotPlan as exc:
        return {"ok": False, "job": job.pk, "message": str(exc)}
    return {**plan_json(plan), "steps_from": steps_from}


def other_size(*, request: HttpRequest, job: Job, measured: Measured, gpus: int) -> Measured | None:
    """A finished run of the job's code snapshot at another GPU count, the nearest to `gpus`.

    One query: the newest such runs with a throughput in the same unit, with summaries.
    """
    if job.code_id is None:
        return None
    runs = (
        jobs_visible_to(user=request.user)
        .filter(
            code_id=job.code_id,
            state__in=FINAL_STATES,
            summary__throughput__gt=0,
            summary__throughput_unit=measured.unit,
        )
        .exclude(pk=job.pk)
        .select_related("summary")
        .defer("command", "setup", "code_diff", "metric_patterns")
        .order_by("-created_at", "-id")[:OTHER_SIZES]
    )
    sizes = [
        measured_run(job=run, summary=run.summary)
        for run in runs
        if run.total_gpus != measured.gpus
    ]
    return min(sizes, key=lambda run: abs(run.gpus - gpus), default=None)


def plan_json(plan: Plan) -> dict[str, Any]:
    """The plan's figures as text the form shows as they are."""
    measured, estimate = plan.measured, plan.estimate
    return {
        "ok": True,
        "job": measured.job_id,
        "unit": measured.unit,
        "measured": {
            "gpus": measured.gpus,
            "throughput": f"{measured.throughput:,.1f}",
            "per_gpu": f"{measured.per_gpu:,.1f}",
            "step_seconds": f"{plan.measured_step_seconds:.4g}",
            "steps": measured.steps,
            "basis": plan.basis,
        },
        "gpus": plan.gpus,
        "steps": plan.steps,
        "batch": plan.batch,
        "efficiency": f"{plan.efficiency.value:.2f}",
        "efficiency_source": plan.efficiency.source,
        "efficiency_note": plan.efficiency.note,
        "throughput": f"{plan.throughput:,.1f}",
        "per_gpu": f"{plan.throughput / plan.gpus:,.1f}",
        "step_seconds": f"{plan.step_seconds:.4g}",
        "duration": format_wait(plan.duration),
        "duration_seconds": int(plan.duration.total_seconds()),
        "gpu_hours": amount_text(estimate.gpu_hours),
        "cost": amount_text(estimate.cost),
        "left_before": amount_text(estimate.left_before),
        "left_after": amount_text(estimate.left_after),
        "fits": plan.fits,
        "message": plan.limit or estimate.message,
        "short_limit": plan.short_limit,
    }
