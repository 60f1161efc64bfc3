"""Single sign-on to a job on the cluster as oneself, with no private key anywhere.

Real servers, each started here and stopped after: slapd (the `directory` fixture), the
OpenID provider backed by it, daphne, a Celery worker and the sandbox, whose sshd trusts
this test's CA. LDAP's alice signs in through the provider in Chromium; her sign-in makes
her certificate account on the sandbox (uid alice, the sandbox's Unix alice); the job she
submits through the form writes a file owned by that uid; after log-out her job's page
sends her to log in. Then a person disabled right after submitting: the worker's next
connection as her is refused, and the pages, the API and the provider keep her out.
"""

import json
import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client

from accounts.services import token_issue
from clusters.certificates.authorities import (
    authorities_publish,
    authority_create,
    sandbox_trust_path,
    trust_owner,
)
from clusters.certificates.trust_file import trusted_keys_write
from clusters.models import Authentication, Cluster, ClusterAccount
from devtools.ldap_server import PASSWORDS
from devtools.openid_provider import OpenIDProvider
from jobs.enums import State
from jobs.models import Attempt, Job, JobEvent
from projects.models import Project
from tests.accounts.sso_flow import sign_in, signed_in_as
from tests.fixtures.sso import SITE
from tests.helpers import QUEUE_WAIT, bearer, screenshot, wait_for

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.django_db(transaction=True),
    # Sign-in, a job queued behind other tests' on the shared sandbox, log-out.
    pytest.mark.timeout(600),
]

PROOF = "made-by-sso.txt"
# What the new-job form sends: a one-CPU job of a few seconds writing into its run directory.
FORM = {
    "name": "sso-proof",
    "template": "command",
    "command": f'id -un > "$PORTAL_RUN_DIR/{PROOF}"',
    "nodes": "1",
    "gpus_per_node": "0",
    "cpus_per_task": "1",
    "time_limit": "0:05:00",
}


@pytest.fixture
def ca_sandbox(sandbox_cluster: Cluster, sandbox_info) -> Iterator[Cluster]:
    """The sandbox trusting this portal's CA (its line in sshd's TrustedUserCAKeys file
    until the test ends), with no personal account: the sign-in makes the person's.

    The sandbox's registration gives its users portal users and key accounts of the same
    names; they are removed, so that LDAP's alice is the portal's alice.
    """
    User.objects.filter(username__in=list(sandbox_info.users)).delete()
    Cluster.objects.filter(pk=sandbox_cluster.pk).update(trusts_portal_ca=True)
    authority_create()
    authorities_publish(path=sandbox_trust_path())
    yield sandbox_cluster
    trusted_keys_write(path=sandbox_trust_path(), owner=trust_owner(), lines=[])


def _attempt(job: Job) -> Attempt:
    return Attempt.objects.get(job=job, number=1)


def _no_private_key_held() -> None:
    accounts = list(ClusterAccount.objects.all())
    assert accounts, "the sign-in made no account"
    assert [a for a in accounts if a.private_key] == []
    assert {a.authentication for a in accounts} == {Authentication.CERTIFICATE}


@pytest.mark.browser
def test_alice_signs_in_through_the_provider_and_her_job_runs_as_her_uid(
    page, sso_portal: str, ca_sandbox: Cluster, celery_worker, project: Project
) -> None:
    page.goto(f"{sso_portal}/")
    page.get_by_role("link", name=f"Sign in with {SITE}").click()
    page.get_by_label("Directory user name").fill("alice")
    page.get_by_label("Directory password").fill(PASSWORDS["alice"])
    page.get_by_role("button", name="Sign in").click()

    page.get_by_role("heading", name="Hello, alice").wait_for()
    assert page.get_by_role("cell", name="Vision models").is_visible()  # ml-team -> vision
    alice = User.objects.get(username="alice")
    account = ClusterAccount.objects.get(user=alice)
    assert (account.cluster_id, account.username, account.authentication) == (
        ca_sandbox.pk,
        "alice",
        Authentication.CERTIFICATE,
    )
    _no_private_key_held()

    page.goto(f"{sso_portal}/jobs/new/")
    page.locator("#id_project").select_option(str(project.pk))
    page.locator("#id_cluster").select_option(ca_sandbox.name)
    for field in ("name", "command", "nodes", "gpus_per_node", "cpus_per_task", "time_limit"):
        page.locator(f"#id_{field}").fill(FORM[field])
    screenshot(page, "sso-new-job")
    page.locator("#submit-job").click()
    page.get_by_role("heading", name=FORM["name"]).wait_for()

    job = Job.objects.get(name=FORM["name"])
    assert (job.user_id, job.project_id, job.cluster_id) == (alice.pk, project.pk, ca_sandbox.pk)
    wait_for(
        lambda: _attempt(job).state in (State.COMPLETED, State.FAILED, State.CANCELLED),
        QUEUE_WAIT,
        "alice's job to run on the sandbox",
    )
    attempt = _attempt(job)
    events = list(JobEvent.objects.filter(attempt=attempt).values_list("reason", flat=True))
    assert attempt.state == State.COMPLETED, events
    assert attempt.account_id == account.pk
    proof = Path(attempt.run_dir) / PROOF
    assert os.stat(proof).st_uid == pwd.getpwnam("alice").pw_uid
    assert proof.read_text() == "alice\n"
    _no_private_key_held()

    page.reload()
    page.locator("#job-state[data-state='COMPLETED']").wait_for()
    screenshot(page, "sso-job-done")
    page.get_by_role("button", name="Log out").click()
    page.get_by_role("button", name="Yes, sign out").click()  # the provider's sign-out
    page.get_by_role("heading", name="Log in").wait_for()

    page.goto(f"{sso_portal}/jobs/{job.pk}/")
    page.get_by_role("heading", name="Log in").wait_for()
    assert page.url == f"{sso_portal}/login/?next=/jobs/{job.pk}/"
    assert FORM["name"] not in page.content()


def test_a_person_disabled_after_submitting_cannot_start_a_job_a_minute_later(
    oidc_on: OpenIDProvider, ca_sandbox: Cluster, celery_worker, project: Project
) -> None:
    client = Client()
    sign_in(client, "alice", PASSWORDS["alice"])
    alice = signed_in_as(client)
    assert alice is not None and alice.username == "alice"
    form = {**FORM, "project": str(project.pk), "cluster": ca_sandbox.name}
    token = token_issue(user=alice, name="notebook", scope="submit").text
    answer = client.post("/jobs/new/", form)
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    first = Job.objects.get(user=alice)
    wait_for(
        lambda: _attempt(first).state not in (State.QUEUED, State.SUBMITTING),
        QUEUE_WAIT,
        "the worker to submit her first job by certificate",
    )
    assert _attempt(first).slurm_job_id, _attempt(first).state

    # An admin disables her (she left the directory) in the transaction that queues her
    # next job: the worker, holding her pooled connection, is handed it afterwards.
    with transaction.atomic():
        assert client.post("/jobs/new/", {**form, "name": "too-late"}).status_code == 302
        User.objects.filter(pk=alice.pk).update(is_active=False)
    second = Job.objects.get(name="too-late")
    wait_for(lambda: _attempt(second).state == State.FAILED, QUEUE_WAIT, "her next job to fail")
    assert _attempt(second).slurm_job_id == ""
    reason = JobEvent.objects.get(attempt=_attempt(second), to_state=State.FAILED).reason
    assert "'alice' is inactive" in reason and "no connection" in reason

    # Her session ends; the form, the API and the provider's sign-in refuse her.
    refused = client.post("/jobs/new/", {**form, "name": "refused"})
    assert refused.status_code == 302 and refused["Location"].startswith("/login/")
    api = bearer(token).post(
        "/api/v1/jobs/",
        json.dumps(
            {
                "project": project.slug,
                "cluster": ca_sandbox.name,
                "name": "by-token",
                "command": FORM["command"],
                "gpus_per_node": 0,
                "cpus_per_task": 1,
                "time_limit": "00:05:00",
            }
        ),
        content_type="application/json",
    )
    assert api.status_code in (401, 403), api.content
    again = Client()
    sign_in(again, "alice", PASSWORDS["alice"])
    assert signed_in_as(again) is None
    assert not Job.objects.filter(name__in=["refused", "by-token"]).exists()
    assert Job.objects.filter(user=alice).count() == 2
    _no_private_key_held()
