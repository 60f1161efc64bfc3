"""The poll's bulk writes (portal_lib.bulk), by COPY and by plain statements, in and out of
a transaction: the log store is the one that writes outside any."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from monitoring.logs.store import log_read
from monitoring.models import LogFile
from projects.models import Project
from tests import factories
from tests.helpers import store_log

pytestmark = pytest.mark.django_db(transaction=True)  # autocommit, as the poll's log store


@pytest.mark.parametrize("copy", [True, False], ids=["binary COPY", "plain SQL"])
def test_stored_bytes_and_sizes_land_outside_a_transaction(
    project: Project, member: User, copy: bool, settings: Any
) -> None:
    """The staged UPDATE once lost its rows: each autocommit statement emptied the stage."""
    settings.BULK_COPY = copy
    _, attempt = factories.job(project, member, factories.cluster())
    store_log(attempt, b"first line\n")
    store_log(attempt, b"second line\n")
    log_file = LogFile.objects.get(attempt=attempt, name="stdout.log")
    assert log_file.size == len(b"first line\nsecond line\n")
    read = log_read(attempt_id=attempt.pk, file="stdout.log", offset=0, limit=100)
    assert read.data == b"first line\nsecond line\n"
