"""The test database's end (tests/fixtures/database.py): nothing left keeps it from being dropped."""

import threading

import pytest
from django.db import connection, connections

from tests.fixtures.database import end_other_sessions
from tests.helpers import other_sessions, wait_for


@pytest.mark.django_db(transaction=True)
def test_a_session_a_finished_thread_left_open_is_ended() -> None:
    pids: list[int] = []

    def query_and_forget() -> None:  # Django's connections are per thread; nobody closes it
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pids.append(cursor.fetchone()[0])

    thread = threading.Thread(target=query_and_forget)
    thread.start()
    thread.join()
    assert pids[0] in other_sessions()

    assert end_other_sessions() >= 1

    wait_for(lambda: pids[0] not in other_sessions(), 30, "the thread's session to end")
    assert connection.is_usable()  # this test's own session is kept
