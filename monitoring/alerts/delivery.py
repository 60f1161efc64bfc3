"""Alert delivery by mail and to a Slack-compatible webhook, from a Celery task.

Each channel is claimed with a conditional update before it is sent, so a retried
or duplicated task never delivers twice. A webhook URL must be http(s) and every
address its host resolves to must be public (`portal_lib.addresses.is_public`): no
loopback (unless ALERT_WEBHOOK_ALLOW_LOOPBACK, for the tests' receiver), private,
link-local, multicast or reserved address, nor an IPv6 form that carries one,
checked when the rule is saved and again at send time. At send time the name is
resolved once and the request goes to exactly the address that was checked (the URL's
host swapped for it, the Host header and TLS server name kept as the name, so the
certificate is still verified for the name): letting the HTTP client resolve again
would let a name that answered with a public address first answer with a private one
for the connection (DNS rebinding).
"""

import ipaddress
import logging
import socket
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse
from django.utils import timezone

from monitoring.models import Alert
from portal_lib.addresses import is_public

logger = logging.getLogger(__name__)


class WebhookRefused(Exception):
    """The URL may not be called; the message says why, for the rule's form."""


def alert_path(alert: Alert) -> str:
    """The job page at the attempt and x where the alert fired."""
    path = reverse("job-page", args=[alert.job_id]) + f"?attempt={alert.attempt.number}"
    if alert.at_x is not None:
        path += f"&at={alert.at_x:g}"
    return path


def webhook_check(url: str) -> list[str]:
    """The addresses the URL's host resolves to, all allowed; raises WebhookRefused."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookRefused("The webhook URL must start with http:// or https:// and name a host.")
    if parts.username or parts.password:
        raise WebhookRefused("The webhook URL must not carry a user name or password.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        found = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
    except (OSError, ValueError) as exc:
        raise WebhookRefused(f"The webhook host {parts.hostname} does not resolve.") from exc
    addresses = sorted({str(info[4][0]) for info in found})
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip.is_loopback and settings.ALERT_WEBHOOK_ALLOW_LOOPBACK:
            continue
        if not is_public(ip):
            raise WebhookRefused(
                f"The webhook host {parts.hostname} resolves to {address}, which is not a "
                "public address: the portal only calls public webhooks."
            )
    return addresses


def webhook_payload(alert: Alert) -> dict[str, str]:
    link = settings.PORTAL_URL.rstrip("/") + alert_path(alert)
    return {"text": f"{alert.message} <{link}|open the job>"}


def _claim(alert: Alert, field: str) -> bool:
    now = timezone.now()
    return bool(Alert.objects.filter(pk=alert.pk, **{field: None}).update(**{field: now}))


def alert_deliver(*, alert_id: int) -> None:
    """Send the alert by the rule's mail and webhook channels, each at most once."""
    alert = Alert.objects.select_related("rule", "user", "attempt", "job").get(pk=alert_id)
    rule = alert.rule
    if rule.to_mail and alert.user.email and _claim(alert, "mailed_at"):
        link = settings.PORTAL_URL.rstrip("/") + alert_path(alert)
        send_mail(
            f"[portal] Alert: {alert.message[:120]}",
            f"{alert.message}\n\n{link}\n\nYou get this mail because of an alert rule you set; "
            "change it under Alerts in the portal.\n",
            settings.DEFAULT_FROM_EMAIL,
            [alert.user.email],
        )
    if rule.webhook_url and _claim(alert, "webhook_at"):
        error = webhook_send(rule.webhook_url, webhook_payload(alert))
        if error:
            Alert.objects.filter(pk=alert.pk).update(webhook_error=error[:300])


def webhook_send(url: str, payload: dict[str, str]) -> str:
    """POST the payload to an address checked by this call; returns "" or what went wrong
    (logged, never raised). The checked addresses are tried in turn until one connects."""
    try:
        addresses = webhook_check(url)
    except WebhookRefused as exc:
        return str(exc)
    target = httpx.URL(url)
    name = target.raw_host.decode("ascii")  # IDNA-encoded, as on the wire
    headers = {"Host": target.netloc.decode("ascii")}
    error = ""
    with httpx.Client(timeout=settings.ALERT_WEBHOOK_TIMEOUT, follow_redirects=False) as client:
        for address in addresses:
            try:
                response = client.post(
                    target.copy_with(host=address),
                    json=payload,
                    headers=headers,
                    extensions={"sni_hostname": name},
                )
            except httpx.ConnectError as exc:
                error = f"{type(exc).__name__}: {exc}"
                logger.warning("alert webhook %s at %s: %s", name, address, exc)
                continue
            except httpx.HTTPError as exc:
                logger.warning("alert webhook %s at %s failed: %s", name, address, exc)
                return f"{type(exc).__name__}: {exc}"
            if response.status_code >= 300:
                return f"HTTP {response.status_code}"
            return ""
    return error
