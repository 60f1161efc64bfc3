"""The local run's outbox: the mail the portal sent, each person seeing what was sent to
them (staff: all of it). On only where OUTBOX_DIR is set (`make run`)."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from portal_lib.outbox import outbox_read


def outbox_enabled(request: HttpRequest) -> dict[str, bool]:
    """Template context: whether the menu shows the outbox."""
    return {"outbox_on": bool(settings.OUTBOX_DIR)}


@require_safe
@login_required
def outbox_page(request: HttpRequest) -> HttpResponse:
    if not settings.OUTBOX_DIR:
        raise Http404("No outbox: this portal sends its mail through a mail server.")
    user = request.user
    everyone = bool(user.is_staff)
    address = None if everyone else (getattr(user, "email", "") or "")
    mails = outbox_read(address=address) if everyone or address else []
    return render(
        request,
        "outbox/outbox.html",
        {"mails": mails, "everyone": everyone, "address": address, "folder": settings.OUTBOX_DIR},
    )
