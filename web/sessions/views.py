"""`/sessions/<job>/lab/...`: a session's JupyterLab, proxied over its owner's SSH login.

Only for whoever may open the session (sessions.access), checked at every request, so a
logout or a removed membership ends access at the next one. The portal adds the server's
token; the browser never holds it. Writes must come from the portal's own pages (Origin):
the server's own XSRF check does not apply to requests that carry its token.
"""

from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.utils.html import escape
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.csrf import csrf_exempt

from sessions.access import session_for_opener
from sessions.notice import with_notice_script
from sessions.target import SessionUnavailable, lab_target
from sessions.upstream import (
    Upstream,
    forward,
    portal_cookie_names,
    request_headers,
    response_headers,
)

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_METHODS = _SAFE_METHODS | {"POST", "PUT", "PATCH", "DELETE"}


def _refusal(status: int, message: str) -> HttpResponse:
    response = HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
    if status == 503:
        response["Retry-After"] = "2"
    return response


def _starting(message: str) -> HttpResponse:
    """A page that tries again by itself while the server starts (a browser's GET): 202, as
    the start is under way (a 5xx would log an error every 2 s of it)."""
    page = (
        '<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="2">'
        f"<title>Starting JupyterLab</title><p>{escape(message)}</p>"
    )
    response = HttpResponse(page, status=202)
    response["Retry-After"] = "2"
    return response


def _same_origin(request: HttpRequest) -> bool:
    origin = request.headers.get("Origin", "")
    return bool(origin) and origin.rstrip("/") == request.build_absolute_uri("/").rstrip("/")


def _is_html(headers: list[tuple[str, str]]) -> bool:
    return any(
        name.lower() == "content-type" and value.lower().startswith("text/html")
        for name, value in headers
    )


async def _body_of(upstream: Upstream) -> AsyncIterator[bytes]:
    try:
        while chunk := await sync_to_async(upstream.read, thread_sensitive=False)():
            yield chunk
    finally:
        await sync_to_async(upstream.finish, thread_sensitive=False)()


@csrf_exempt
@xframe_options_sameorigin
async def session_lab(request: HttpRequest, job_id: int, rest: str = "") -> HttpResponseBase:
    user = await request.auser()
    if not user.is_authenticated:
        if request.method == "GET":
            return redirect_to_login(request.get_full_path())
        return _refusal(403, "Sign in to open this session.")
    job = await sync_to_async(session_for_opener)(user=user, job_id=job_id)
    if job is None:
        return _refusal(404, "No such session, or not yours to open.")
    method = request.method or "GET"
    if method not in _METHODS:
        return _refusal(405, "Method not allowed.")
    if method not in _SAFE_METHODS and not _same_origin(request):
        return _refusal(403, "Refused: a change to a session must come from the portal's pages.")
    declared = request.headers.get("Content-Length", "0")
    cap = settings.SESSION_PROXY_BODY_MAX_BYTES
    if not declared.isdigit() or int(declared) > cap:
        return _refusal(413, f"A request to a session carries at most {cap} bytes.")
    try:
        target = await sync_to_async(lab_target)(job=job)
        headers = request_headers(request.headers, target=target, portal=portal_cookie_names())
        upstream = await sync_to_async(forward, thread_sensitive=False)(
            target=target,
            method=method,
            path=request.get_full_path(),
            headers=headers,
            body=request.body,
        )
    except SessionUnavailable as exc:
        if (
            exc.status == 503
            and method == "GET"
            and "text/html" in request.headers.get("Accept", "")
        ):
            return _starting(str(exc))
        return _refusal(exc.status, str(exc))
    response: HttpResponse | StreamingHttpResponse
    if upstream.body is not None:
        body = upstream.body
        if _is_html(upstream.headers):  # JupyterLab's pages show the portal's notices
            body = with_notice_script(body, job_id)
        response = HttpResponse(body, status=upstream.status)
    else:
        response = StreamingHttpResponse(_body_of(upstream), status=upstream.status)
    response.reason_phrase = upstream.reason or None  # type: ignore[assignment]
    # JupyterLab's pages run its own scripts: its answer keeps its own policy, not the portal's.
    setattr(response, "_csp_exempt", True)  # noqa: B010 - django-csp's mark, not a field
    for name, value in response_headers(upstream.headers, portal_cookie_names()):
        if name.lower() == "set-cookie":
            response.cookies.load(value)  # several: one header each, as the server set them
        else:
            response[name] = value
    return response
