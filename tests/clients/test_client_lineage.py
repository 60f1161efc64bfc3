"""The Python client's Job.fork and Job.resume: from a chosen checkpoint, lineage read back."""

import pytest
from portal_client import Portal, PortalError

from jobs.models import Job
from tests.clients.test_client import _portal, portal, same_connection  # noqa: F401  (fixtures)
from tests.helpers import Tokens
from tests.jobs.test_lineage import STEP_20, parent  # noqa: F401  (the fixture)


def test_fork_and_resume_from_step_20(
    portal: Portal,  # noqa: F811
    parent: Job,  # noqa: F811
    no_submission: list[int],
) -> None:
    handle = portal.job(parent.pk)
    assert handle.parent is None
    fork = handle.fork(step=20, command="python train.py --lr 0.003 --steps 60", name="lr 3e-3")
    assert (fork.parent, fork.parent_step, fork.name) == (parent.pk, 20, "lr 3e-3")
    assert [a["resume_from"] for a in fork.attempts()] == [STEP_20]
    assert Job.objects.get(pk=fork.id).params["lr"] == 0.003
    assert handle.resume(attempt=1, checkpoint="step-20.pt") is handle
    assert (handle.attempt, handle.state) == (2, "QUEUED")
    assert handle.attempts()[-1]["resume_from"] == STEP_20


def test_a_member_may_fork_but_not_resume_the_owners_job(
    tokens: Tokens,
    parent: Job,  # noqa: F811
    no_submission: list[int],
    same_connection: None,  # noqa: F811
) -> None:
    member = _portal(tokens.member).job(parent.pk)
    with pytest.raises(PortalError) as refused:
        member.resume(step=20)
    assert refused.value.status == 403 and "fork it instead" in str(refused.value)
    assert member.fork(step=40).parent_step == 40
