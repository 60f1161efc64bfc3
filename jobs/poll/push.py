"""Deltas to the open job pages: one channel group per job (`jobs.rundir.job_group`).

The state poll sends each attempt's new state, the files poll its new log bytes and
points (`monitoring.ingest.watch`); each kind comes from one poll at a time, in order. Only
jobs with a page open get theirs (`jobs.poll.open_pages`).
"""

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from jobs.poll.open_pages import jobs_watched
from jobs.rundir import job_group

logger = logging.getLogger(__name__)

PUSH_CONCURRENCY = 16  # jobs whose deltas are sent at once (a Redis connection each)


def push_deltas(deltas: list[dict[str, Any]]) -> None:
    """Send `job.delta` messages (each names its "job") to the jobs with a page open; a lost
    one is never an error."""
    if not deltas:
        return
    push_built(
        lambda watched: (
            deltas if watched is None else [delta for delta in deltas if delta["job"] in watched]
        )
    )


def push_built(build: Callable[[set[int] | None], list[dict[str, Any]]]) -> None:
    """Send the deltas `build` makes for the jobs with a page open now (it gets their ids,
    or None when Redis cannot say: then every job's), with one read of the open pages.

    One trip into the event loop for all of them: one per delta cost ~10 ms each, ten
    seconds of a poll of a thousand jobs.
    """
    layer = get_channel_layer()
    if layer is None:
        return
    # A job nobody follows costs no send, nor the building of its delta (most of them).
    deltas = build(jobs_watched())
    if deltas:
        async_to_sync(_send_all)(layer, deltas)


async def _send_all(layer: Any, deltas: list[dict[str, Any]]) -> None:
    """Send each job's deltas in order, PUSH_CONCURRENCY jobs at a time.

    Each send is a few Redis round trips even for a group nobody listens to; a thousand
    jobs one after the other took most of a second.
    """
    by_job: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for delta in deltas:
        by_job[delta["job"]].append(delta)
    gate = asyncio.Semaphore(PUSH_CONCURRENCY)

    async def send(job_deltas: list[dict[str, Any]]) -> None:
        async with gate:
            for delta in job_deltas:
                try:
                    await layer.group_send(job_group(delta["job"]), delta)
                except Exception:  # a lost push is caught up over REST; never fail the poll
                    logger.exception("push to job %s failed", delta["job"])

    await asyncio.gather(*(send(job_deltas) for job_deltas in by_job.values()))
