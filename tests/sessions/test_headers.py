"""What crosses the proxy: no hop-by-hop headers, no portal cookie or credential, the token added."""

from clusters.models import SessionReach
from clusters.slurm.tools import DEFAULT_TOOLS
from clusters.ssh import Endpoint
from jobs.session_reach import SessionWay
from sessions.target import LabTarget
from sessions.upstream import forwarded_cookies, request_headers, response_headers

PORTAL = {"sessionid", "csrftoken"}
TARGET = LabTarget(
    endpoint=Endpoint(cluster_name="c", host="h", port=22, host_key="k", username="alice"),
    node="n1",
    port=41234,
    token="ab" * 32,
    attempt="a",
    way=SessionWay(SessionReach.SRUN_RELAY, "n1", 41234, "4711", DEFAULT_TOOLS),
)


def test_a_request_loses_hop_by_hop_headers_and_the_portals_cookies_and_credentials() -> None:
    sent = request_headers(
        {
            "Connection": "keep-alive, X-Secret-Hop",
            "X-Secret-Hop": "1",
            "Keep-Alive": "timeout=5",
            "Transfer-Encoding": "chunked",
            "Upgrade": "h2c",
            "Proxy-Authorization": "Basic x",
            "Authorization": "token stolen",
            "Host": "portal.example",
            "Origin": "https://portal.example",
            "Cookie": "sessionid=s3cret; _xsrf=2|abc; csrftoken=c5rf; username-127-0-0-1=u",
            "X-Forwarded-For": "10.0.0.1",
            "Content-Type": "application/json",
            "X-XSRFToken": "2|abc",
            "Accept-Encoding": "gzip, br",
        },
        target=TARGET,
        portal=PORTAL,
    )
    names = [name.lower() for name, _ in sent]
    for gone in (
        "connection",
        "x-secret-hop",
        "keep-alive",
        "transfer-encoding",
        "upgrade",
        "proxy-authorization",
        "origin",
        "x-forwarded-for",
        "accept-encoding",  # answers uncompressed, so the token can be taken out of them
    ):
        assert gone not in names
    headers = dict(sent)
    assert headers["Cookie"] == "_xsrf=2|abc; username-127-0-0-1=u"
    assert headers["Authorization"] == f"token {TARGET.token}"
    assert headers["Host"] == "127.0.0.1:41234"
    assert headers["Content-Type"] == "application/json"
    assert names.count("authorization") == 1 and names.count("host") == 1


def test_only_the_portals_cookies_are_stripped() -> None:
    assert forwarded_cookies("sessionid=1", PORTAL) == ""
    assert forwarded_cookies("a=1;sessionid=2 ;b=3", PORTAL) == "a=1; b=3"


def test_an_answer_cannot_set_the_portals_cookies_or_hop_by_hop_headers() -> None:
    kept = response_headers(
        [
            ("Content-Type", "text/html"),
            ("Connection", "close, X-Hop"),
            ("X-Hop", "1"),
            ("Transfer-Encoding", "chunked"),
            ("Set-Cookie", "_xsrf=2|abc; Path=/sessions/7/lab/"),
            ("Set-Cookie", "sessionid=evil; Path=/"),
            ("Set-Cookie", "csrftoken=evil; Path=/"),
        ],
        PORTAL,
    )
    assert kept == [
        ("Content-Type", "text/html"),
        ("Set-Cookie", "_xsrf=2|abc; Path=/sessions/7/lab/"),
    ]
