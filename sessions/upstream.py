"""HTTP to a session over its owner's SSH login: keep-alive connections on SSH tunnels,
kept per session, and the headers that may cross in each direction.

What crosses: the browser's request less hop-by-hop headers, the portal's cookies and
credentials, and the headers the server checks against its own address (Host, Origin);
the portal adds the server's token. Back: the answer less hop-by-hop headers and any
cookie named as one of the portal's.
"""

import http.client
import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie

from django.conf import settings

from clusters.errors import ClusterError
from clusters.ssh import pool
from sessions.target import LabTarget, SessionUnavailable, forget

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# Never forwarded to the server: the portal's own credentials, what names the portal's address
# (the server checks Host and Origin against its own), what the proxy sets itself.
_NOT_FORWARDED = HOP_BY_HOP | {
    "host",
    "authorization",
    "cookie",
    "origin",
    "referer",
    "content-length",
    "expect",
    # Answers uncompressed: the token is taken out of the ones read whole (Upstream.read_small).
    "accept-encoding",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "x-csrftoken",
}
CHUNK_BYTES = 65536
# An answer up to this size is read whole before it is sent on (Upstream.read_small).
SMALL_BODY_BYTES = 1 << 20


def portal_cookie_names() -> frozenset[str]:
    return frozenset(
        {
            settings.SESSION_COOKIE_NAME,
            settings.CSRF_COOKIE_NAME,
            settings.LANGUAGE_COOKIE_NAME,
            "messages",
        }
    )


def _connection_named(value: str) -> set[str]:
    return {name.strip().lower() for name in value.split(",") if name.strip()}


def forwarded_cookies(header: str, portal: Collection[str]) -> str:
    """The Cookie header less the portal's cookies (the server's own `_xsrf` and such stay)."""
    kept = []
    for part in header.split(";"):
        name, _, _ = part.strip().partition("=")
        if name and name not in portal:
            kept.append(part.strip())
    return "; ".join(kept)


def request_headers(
    headers: Mapping[str, str], *, target: LabTarget, portal: Collection[str]
) -> list[tuple[str, str]]:
    """The headers sent to the session for a browser's request."""
    named = _connection_named(headers.get("Connection", ""))
    kept = [
        (name, value)
        for name, value in headers.items()
        if name.lower() not in _NOT_FORWARDED and name.lower() not in named
    ]
    if cookie := forwarded_cookies(headers.get("Cookie", ""), portal):
        kept.append(("Cookie", cookie))
    kept.append(("Host", f"127.0.0.1:{target.port}"))
    kept.append(("Authorization", f"token {target.token}"))
    return kept


def _sets_portal_cookie(value: str, portal: Collection[str]) -> bool:
    cookie: SimpleCookie = SimpleCookie()
    try:
        cookie.load(value)
    except CookieError:
        return True  # one the parser refuses is dropped
    return not cookie or any(name in portal for name in cookie)


def response_headers(
    headers: Iterable[tuple[str, str]], portal: Collection[str]
) -> list[tuple[str, str]]:
    """The session's answer headers the browser gets."""
    headers = list(headers)
    named: set[str] = set()
    for name, value in headers:
        if name.lower() == "connection":
            named |= _connection_named(value)
    return [
        (name, value)
        for name, value in headers
        if name.lower() not in HOP_BY_HOP
        and name.lower() not in named
        and not (name.lower() == "set-cookie" and _sets_portal_cookie(value, portal))
    ]


class _TunnelHTTP(http.client.HTTPConnection):
    """HTTP/1.1 on an SSH tunnel to the session (opened on first use)."""

    def __init__(self, target: LabTarget, timeout: float) -> None:
        super().__init__("127.0.0.1", target.port, timeout=timeout)
        self.target = target

    def connect(self) -> None:
        try:
            with pool.session(self.target.endpoint) as connection:
                tunnel = self.target.open_stream(connection)
        except ClusterError as exc:
            forget(self.target.attempt)
            raise SessionUnavailable(
                "JupyterLab does not answer yet (starting, or stopped); try again in a moment."
            ) from exc
        tunnel.settimeout(self.timeout)
        self.sock = tunnel  # socket-like: sendall, recv, makefile


class _Idle:
    """Open connections to sessions that wait for their next request, a few per session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[object, ...], list[_TunnelHTTP]] = {}

    def take(self, target: LabTarget) -> _TunnelHTTP | None:
        with self._lock:
            held = self._held.get(target.pool_key)
            return held.pop() if held else None

    def give_back(self, connection: _TunnelHTTP) -> None:
        with self._lock:
            held = self._held.setdefault(connection.target.pool_key, [])
            if len(held) < settings.SESSION_PROXY_IDLE_CONNECTIONS:
                held.append(connection)
                return
        connection.close()


idle = _Idle()


@dataclass
class Upstream:
    """A session's answer, its body read in chunks; its connection goes back when read whole.

    A small answer of known length comes whole (`body`): sent in one write, it waits on no
    delayed ACK behind its headers, and the server's token is taken out of it (JupyterLab
    writes the token into its page's config; the portal adds it to every request anyway).
    """

    status: int
    reason: str
    headers: list[tuple[str, str]]
    _response: http.client.HTTPResponse = field(repr=False)
    _connection: _TunnelHTTP = field(repr=False)
    _done: bool = False
    body: bytes | None = None

    def read_small(self, token: str) -> None:
        """Read the body now if it is small and its length known, without the token."""
        length = self._response.length
        if length is None or length > SMALL_BODY_BYTES:
            return
        self.body = self._response.read().replace(token.encode(), b"")
        self.headers = [(n, v) for n, v in self.headers if n.lower() != "content-length"]
        self.finish()

    def read(self) -> bytes:
        if self._done:
            return b""
        chunk = self._response.read(CHUNK_BYTES) if not self._response.isclosed() else b""
        if not chunk:
            self.finish()
        return chunk

    def finish(self) -> None:
        """Give the connection back if the answer was read to its end, else close it."""
        if self._done:
            return
        self._done = True
        if self._response.isclosed() and not self._response.will_close:
            idle.give_back(self._connection)
        else:
            self._connection.close()


def forward(
    *, target: LabTarget, method: str, path: str, headers: list[tuple[str, str]], body: bytes
) -> Upstream:
    """Send one request to the session; a kept connection the server has closed is retried
    once on a new one. Raises SessionUnavailable when the session does not answer."""
    for kept in (True, False):
        connection = idle.take(target) if kept else None
        if kept and connection is None:
            continue
        if connection is None:
            connection = _TunnelHTTP(target, settings.SESSION_PROXY_TIMEOUT_SECONDS)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            if body or method not in ("GET", "HEAD", "OPTIONS", "DELETE"):
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body or None)
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            if kept:
                continue
            raise SessionUnavailable(f"JupyterLab stopped answering: {exc}", status=502) from exc
        except SessionUnavailable:
            connection.close()
            raise
        upstream = Upstream(
            status=response.status,
            reason=response.reason,
            headers=response.getheaders(),
            _response=response,
            _connection=connection,
        )
        try:
            upstream.read_small(target.token)
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            raise SessionUnavailable(f"JupyterLab stopped answering: {exc}", status=502) from exc
        return upstream
    raise AssertionError("unreachable")  # pragma: no cover
