"""When a running attempt's working directory is searched again (for trainers' record files
and for the checkpoints they save there): pure, from the times alone."""

SEARCH_EVERY = 30.0  # seconds between finds of a running attempt, at most
SEARCH_FIRST = 5.0  # ... and at least: each waits as long as the attempt had run at the last


def search_due(
    *,
    finished: bool,
    final: bool,
    searched_at: float | None,
    since: float,
    now: float,
    every: float = SEARCH_EVERY,
    first: float = SEARCH_FIRST,
) -> bool:
    """An ended attempt's last find once; a running one's at 5, 10, 20... s, then every 30 s."""
    if finished:
        return not final
    if searched_at is None:
        return True
    ran = searched_at - since
    return now - searched_at >= min(every, max(first, ran))
