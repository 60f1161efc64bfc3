"""50 submissions at once against a budget for 10: the quota row lock admits exactly 10."""

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection

from jobs.errors import JobError
from jobs.models import Attempt, Job
from jobs.services import job_submit
from projects.models import Quota, Reservation
from projects.selectors import project_usage
from tests import factories

SUBMISSIONS = 50


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_submissions_against_a_budget_for_ten(
    submitter, project, cluster, no_submission
) -> None:
    # Each job reserves 2 GPUs x 3 h = 6 GPU-h; the budget holds exactly 10 of them.
    Quota.objects.filter(project=project).update(
        gpu_hours_per_period=Decimal("60"), max_concurrent_gpus=None
    )
    spec = factories.spec(gpus_per_node=2, time_limit=timedelta(hours=3))
    partitions = {"gpu": factories.GPU_PARTITION}
    start = threading.Barrier(SUBMISSIONS)
    accepted: list[int] = []
    refused: list[str] = []
    crashed: list[BaseException] = []

    def submit() -> None:
        try:
            start.wait(timeout=60)
            job = job_submit(
                user=submitter, project=project, cluster=cluster, spec=spec, partitions=partitions
            )
            accepted.append(job.pk)
        except JobError as exc:
            refused.append(exc.message)
        except BaseException as exc:
            crashed.append(exc)
        finally:
            connection.close()  # each thread has its own database connection

    threads = [threading.Thread(target=submit) for _ in range(SUBMISSIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert crashed == []
    assert len(accepted) == 10
    assert len(refused) == 40
    assert set(refused) == {"needs 6 GPU-h, 0 GPU-h left this month in project vision"}
    # No reservation leaked: one per accepted job, nothing from the refused ones.
    assert sorted(Job.objects.values_list("pk", flat=True)) == sorted(accepted)
    assert Attempt.objects.count() == Reservation.objects.count() == 10
    usage = project_usage(project=project)
    assert (usage.reserved_gpu_hours, usage.left_gpu_hours) == (Decimal("60"), 0)
    assert len(no_submission) == 10
