"""Driving the poll's ingest with the bytes a job wrote, as the agent would bring them."""

from clusters.agent import AgentReply, FileChunk, Listing, ListingEntry
from jobs.enums import State
from jobs.models import Attempt
from jobs.rundir import file_key, run_dir_key
from monitoring.ingest.watch import MonitoringWatcher
from monitoring.models import LogFile


def running(attempt: Attempt, *, nodes: str = "n1") -> Attempt:
    Attempt.objects.filter(pk=attempt.pk).update(
        run_dir=f"/runs/{attempt.uuid}", state=State.RUNNING, node_list=nodes
    )
    return Attempt.objects.select_related("job", "job__cluster").get(pk=attempt.pk)


def offset_of(attempt: Attempt, name: str) -> int:
    found = LogFile.objects.filter(attempt=attempt, name=name).first()
    return found.size if found is not None else 0


def reply_with(
    writes: dict[Attempt, dict[str, bytes]], listings: dict[Attempt, list[str]] | None = None
) -> AgentReply:
    """The reply of one agent call: each file's bytes from its stored size on."""
    files = {}
    for attempt, by_name in writes.items():
        for name, data in by_name.items():
            offset = offset_of(attempt, name)
            files[file_key(attempt.uuid, name)] = FileChunk(
                offset=offset, data=data, size=offset + len(data), more=False, error=None, inode=1
            )
    listed = {
        run_dir_key(attempt.uuid): Listing(
            entries=tuple(ListingEntry(n, 100, 0.0, False) for n in names),
            error=None,
            truncated=False,
        )
        for attempt, names in (listings or {}).items()
    }
    return AgentReply(time=0.0, files=files, listings=listed)


def ingest(attempts: list[Attempt], reply: AgentReply) -> set[int]:
    watcher = MonitoringWatcher()
    watcher.requests(attempts)
    return watcher.ingest(attempts, reply)
