"""The watchers each poll runs on what its one agent call brought: registered once, in order.

`jobs` never imports `monitoring`: monitoring hands its pipeline over when the apps
are ready (`monitoring.pipeline`), and the poll runs whatever is registered. The order
is the pipeline's, a tuple: nothing appends to it while the poll runs.
"""

from dataclasses import dataclass
from typing import Protocol

from clusters.agent import AgentReply, FileRead, ListingRead
from jobs.models import Attempt


class FileWatcher(Protocol):
    """Reads files of the polled attempts in the same agent call as the poll."""

    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]: ...

    def ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        """Store what the reply brought; returns the attempts with bytes still unread."""
        ...


@dataclass(frozen=True)
class Pipeline:
    """`watchers` run on every attempt once a poll, in order; `page_watchers` also read the
    jobs with a page open between the slices of a long poll (their rules do not count
    time between polls)."""

    watchers: tuple[FileWatcher, ...] = ()
    page_watchers: tuple[FileWatcher, ...] = ()


_registered = Pipeline()


def pipeline_register(pipeline: Pipeline) -> None:
    """The poll's pipeline from now on; registering again replaces it (never adds to it)."""
    global _registered
    _registered = pipeline


def poll_pipeline() -> Pipeline:
    return _registered
