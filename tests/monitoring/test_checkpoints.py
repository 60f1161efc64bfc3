from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.agent import AgentReply, Listing, ListingEntry
from monitoring.checkpoints.registry import checkpoints_ingest, listing_key
from monitoring.models import Checkpoint
from tests import factories


def _reply(attempts, names: list[tuple[str, int]], *, truncated: bool = False) -> AgentReply:
    listing = Listing(
        entries=tuple(ListingEntry(n, size, 1796000000.0 + size, False) for n, size in names),
        error=None,
        truncated=truncated,
    )
    return AgentReply(time=0.0, listings={listing_key(a): listing for a in attempts})


def test_a_poll_writes_only_what_changed_in_one_read_for_all_attempts(member, project) -> None:
    cluster = factories.cluster()
    attempts = [factories.job(project, member, cluster, name=f"j{i}")[1] for i in range(20)]
    checkpoints_ingest(attempts, _reply(attempts, [("step-10.pt", 10), ("step-20.pt", 20)]))
    assert Checkpoint.objects.count() == 40

    with CaptureQueriesContext(connection) as unchanged:
        checkpoints_ingest(attempts, _reply(attempts, [("step-10.pt", 10), ("step-20.pt", 20)]))
    assert len(unchanged) == 1  # the read; nothing to write

    # The trainer removed step 10, grew step 20 and wrote step 30.
    checkpoints_ingest(attempts, _reply(attempts, [("step-20.pt", 21), ("step-30.pt", 30)]))
    rows = set(Checkpoint.objects.values_list("attempt_id", "name", "size"))
    assert rows == {
        (a.pk, n, s) for a in attempts for n, s in (("step-20.pt", 21), ("step-30.pt", 30))
    }

    # A truncated listing adds what it saw and deletes nothing it could not see.
    checkpoints_ingest(attempts[:1], _reply(attempts[:1], [("step-40.pt", 40)], truncated=True))
    names = set(Checkpoint.objects.filter(attempt=attempts[0]).values_list("name", flat=True))
    assert names == {"step-20.pt", "step-30.pt", "step-40.pt"}
