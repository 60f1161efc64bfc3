"""Draining a node: staff only; the argv keeps hostile text as one quoted argument."""

import shlex

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from clusters.slurm import drain_argv
from tests import factories

URL = "/clusters/{}/nodes/{}/drain/"


def test_drain_argv_is_one_scontrol_update_with_a_one_line_reason() -> None:
    argv = drain_argv("gpu07", "slow GPU;\n rm -rf / $(id) `x`")
    assert argv == [
        "scontrol",
        "update",
        "nodename=gpu07",
        "state=drain",
        "reason=slow GPU; rm -rf / $(id) `x`",
    ]
    # Over SSH the adapter sends shlex.join: the reason stays one word for the shell.
    assert shlex.split(shlex.join(argv)) == argv
    for bad in ("", "n1 n2", "n1;id", "-x", "../n1"):
        with pytest.raises(ValueError, match="not a node name"):
            drain_argv(bad, "why")
    with pytest.raises(ValueError, match="needs a reason"):
        drain_argv("n1", "  \n ")


@pytest.mark.django_db
def test_anonymous_is_sent_to_log_in(client: Client) -> None:
    cluster = factories.cluster()
    response = client.post(URL.format(cluster.name, "n1"), {"reason": "slow"})
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_non_staff_user_is_refused(client: Client, outsider, member) -> None:
    cluster = factories.cluster()
    for user in (outsider, member):
        client.force_login(user)
        assert client.post(URL.format(cluster.name, "n1"), {"reason": "x"}).status_code == 403


def test_staff_must_post(client: Client, staff) -> None:
    cluster = factories.cluster()
    client.force_login(staff)
    assert client.get(URL.format(cluster.name, "n1")).status_code == 405
    assert client.post(URL.format("nowhere", "n1"), {"reason": "x"}).status_code == 404


def test_staff_without_an_account_on_the_cluster_is_told_what_to_register(
    client: Client, staff
) -> None:
    cluster = factories.cluster()
    client.force_login(staff)
    response = client.post(
        URL.format(cluster.name, "n1"),
        {"reason": "slow", "next": "/jobs/1/?x=1"},
    )
    assert response.status_code == 302 and response["Location"] == "/jobs/1/?x=1"
    (message,) = [str(m) for m in get_messages(response.wsgi_request)]
    assert f"Cluster {cluster.name} has no account to run scontrol as" in message


def test_an_offsite_next_is_not_followed(client: Client, staff) -> None:
    cluster = factories.cluster()
    client.force_login(staff)
    response = client.post(
        URL.format(cluster.name, "n1"), {"reason": "slow", "next": "https://evil.example/"}
    )
    assert response.status_code == 302 and response["Location"] == "/"


def test_a_drain_without_the_csrf_token_is_refused(staff) -> None:
    cluster = factories.cluster()
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    assert client.post(URL.format(cluster.name, "n1"), {"reason": "x"}).status_code == 403
