import pytest

from monitoring.logs.store import Delivery, log_files, log_read, log_store, log_tail
from monitoring.models import LogChunk
from tests import factories


@pytest.fixture
def attempt(member, project):
    _, attempt = factories.job(project, member, factories.cluster())
    return attempt


def _store(attempt, offset: int, data: bytes, name: str = "stdout.log") -> None:
    files = log_files(attempt_ids=[attempt.pk], names=[name])
    log_store(files=files, deliveries=[Delivery(attempt.pk, name, offset, data)])


def _all(attempt) -> bytes:
    return log_read(attempt_id=attempt.pk, file="stdout.log", offset=0, limit=1 << 30).data


def test_a_range_is_stored_once(attempt) -> None:
    _store(attempt, 0, b"hello ")
    _store(attempt, 0, b"hello ")  # delivered again (a retried poll)
    _store(attempt, 3, b"lo world\n")  # overlapping: only the new part counts
    _store(attempt, 40, b"from the future")  # a gap is never stored
    assert _all(attempt) == b"hello world\n"
    assert LogChunk.objects.count() == 2


def test_ugly_bytes_are_kept_exactly(attempt) -> None:
    ugly = b"bar 10%\rbar 50%\rbar 100%\n\xff\xfe\x00 nul\n" + b"x" * 100_000
    for start in range(0, len(ugly), 7777):
        _store(attempt, start, ugly[start : start + 7777])
    assert _all(attempt) == ugly
    tail = log_read(attempt_id=attempt.pk, file="stdout.log", offset=-1, limit=10)
    assert (tail.offset, tail.data, tail.size) == (len(ugly) - 10, b"x" * 10, len(ugly))


def test_storage_is_bounded(attempt, settings) -> None:
    settings.LOG_KEEP_BYTES = 1000
    for n in range(30):
        _store(attempt, n * 100, bytes([65 + n % 26]) * 100)
    sliced = log_read(attempt_id=attempt.pk, file="stdout.log", offset=0, limit=10_000)
    assert sliced.size == 3000
    assert 0 < sliced.first_offset <= 2000
    assert sliced.offset == sliced.first_offset and sliced.end == 3000
    assert sum(len(c) for c in LogChunk.objects.values_list("data", flat=True)) <= 1300


def test_tail_reads_only_the_last_chunks_whatever_the_size(
    attempt, django_assert_num_queries
) -> None:
    line = b"step 1, loss=0.5 " + b"." * 100 + b"\n"
    chunk = line * (1024 * 1024 // len(line))
    files = log_files(attempt_ids=[attempt.pk], names=["stdout.log"])
    deliveries = [Delivery(attempt.pk, "stdout.log", n * len(chunk), chunk) for n in range(40)]
    log_store(files=files, deliveries=deliveries)  # 40 MiB in 40 chunks
    # The log file's row, then one batch of the newest chunks: 200 lines fit in the last one.
    with django_assert_num_queries(2):
        tail = log_tail(attempt_id=attempt.pk, file="stdout.log", lines=200)
    assert tail.data == line * 200
    assert tail.end == 40 * len(chunk)


def test_tail_of_a_short_log_and_a_last_line_without_newline(attempt) -> None:
    _store(attempt, 0, b"a\nb\nc")
    assert log_tail(attempt_id=attempt.pk, file="stdout.log", lines=2).data == b"b\nc"
    assert log_tail(attempt_id=attempt.pk, file="stdout.log", lines=10).data == b"a\nb\nc"


def test_a_tail_without_newlines_reads_only_its_byte_cap(
    attempt, django_assert_num_queries
) -> None:
    chunk = b"x" * (1024 * 1024)
    files = log_files(attempt_ids=[attempt.pk], names=["stdout.log"])
    deliveries = [Delivery(attempt.pk, "stdout.log", n * len(chunk), chunk) for n in range(24)]
    log_store(files=files, deliveries=deliveries)  # 24 MiB, not one newline
    # The file's row, then the chunks that can hold the last 2 MiB: one batch, not all 24.
    with django_assert_num_queries(2):
        tail = log_tail(attempt_id=attempt.pk, file="stdout.log", lines=10_000, max_bytes=2 << 20)
    assert tail.data == b"x" * (2 << 20)
    assert (tail.offset, tail.end) == (22 << 20, 24 << 20)


def test_a_capped_tail_starts_at_a_line(attempt) -> None:
    _store(attempt, 0, b"a" * 50 + b"\n" + b"b" * 30 + b"\n")
    tail = log_tail(attempt_id=attempt.pk, file="stdout.log", lines=5, max_bytes=40)
    assert tail.data == b"b" * 30 + b"\n"
