"""From a session's page to a training job: the submit form prefilled from the session, its
working directory as the code (sessions.to_run), and the same over REST.

Only the session's owner reaches either; anyone else gets the answer a missing job gets.
"""

import dataclasses
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.models import Job
from portal_lib.errors import PortalError, form_add_error
from portal_lib.viewers import Viewer
from projects.access import projects_of_member
from sessions.access import session_for_owner
from sessions.to_run import COMMAND_HINT, run_spec, session_root, session_run_submit
from web.auth import request_user
from web.jobs.api import JobSerializer
from web.jobs.forms import JobForm, initial_from_spec
from web.jobs.inputs import JobCloneSerializer
from web.jobs.views import render_job_form


def _session(user: Viewer | None, job_id: int) -> Job:
    session = session_for_owner(user=user, job_id=job_id)
    if session is None:
        raise Http404("No such session of yours.")
    return session


def _root_or_blank(session: Job) -> str:
    """The directory the form names; blank where it cannot be read now (submit says why)."""
    try:
        return session_root(session=session).path
    except PortalError:
        return ""


@login_required
def session_run_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """The submit form prefilled from the session (GET), and the run's submission (POST)."""
    user = request_user(request)
    session = _session(request.user, job_id)
    if request.method == "POST":
        form = JobForm(request.POST, user=user)
        if form.is_valid():
            try:
                job = session_run_submit(
                    user=user,
                    session=session,
                    project=form.cleaned_data["project"],
                    cluster=form.cleaned_data["cluster"],
                    spec=form.spec({}),
                )
            except PortalError as exc:
                form_add_error(form, exc)
            else:
                messages.success(request, f"Job #{job.pk} submitted from session #{session.pk}.")
                return redirect("job-page", job_id=job.pk)
        root = _root_or_blank(session)
    elif request.method == "GET":
        try:
            root = session_root(session=session).path
        except PortalError as exc:
            messages.error(request, exc.message)
            return redirect("job-page", job_id=session.pk)
        initial = initial_from_spec(run_spec(session))
        initial.update(project=session.project_id, cluster=session.cluster.name)
        form = JobForm(user=user, initial=initial)
    else:
        return HttpResponse(status=405)
    form.fields["command"].widget.attrs["placeholder"] = COMMAND_HINT
    context: dict[str, Any] = {"session": session, "root": root, "action": request.path}
    return render_job_form(request, form, from_session=context)


class SessionRunSerializer(JobCloneSerializer):
    """The run's command, and any spec field to change; the rest is the session's."""

    project = serializers.SlugField(
        required=False, help_text="The run's project (yours); none: the session's."
    )


class SessionRunView(APIView):
    @extend_schema(
        operation_id="jobs_session_run",
        request=SessionRunSerializer,
        responses={201: JobSerializer},
    )
    def post(self, request: Request, job_id: int) -> Response:
        """Submit a training job from the session's working directory, packed now as its code,
        with the session's environment and resources; give at least its command."""
        user = request_user(request)
        data = SessionRunSerializer(data=request.data)
        data.is_valid(raise_exception=True)  # first: a bad body is a 400 on any job
        session = _session(user, job_id)
        values = dict(data.validated_data)
        project = session.project
        if "project" in values:
            named = projects_of_member(user=user).filter(slug=values.pop("project")).first()
            if named is None:
                raise serializers.ValidationError(
                    {"project": ["No such project among yours; give its slug."]}
                )
            project = named
        values.pop("code", None)  # the code is the session's directory
        job = session_run_submit(
            user=user,
            session=session,
            project=project,
            cluster=session.cluster,
            spec=dataclasses.replace(run_spec(session), **values),
        )
        job.latest_attempt, job.output_complete = 1, False  # type: ignore[attr-defined]
        return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)
