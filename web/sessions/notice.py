"""`/sessions/<job>/notice.json`: the notices JupyterLab's page shows (sessions.notice), for
whoever may open the session, in their browser session (the script runs in that page)."""

from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from sessions.access import session_for_opener
from sessions.notice import notices_json, session_notices


@require_GET
def session_notice_view(request: HttpRequest, job_id: int) -> JsonResponse:
    if not request.user.is_authenticated:
        return JsonResponse({"detail": "Sign in to the portal again."}, status=403)
    job = session_for_opener(user=request.user, job_id=job_id)
    if job is None:
        return JsonResponse({"detail": "No such session, or not yours to open."}, status=404)
    response = JsonResponse(notices_json(session_notices(job=job, now=timezone.now())))
    response["Cache-Control"] = "no-store"
    return response
