"""Slurm's job states, as squeue and sacct print them, mapped to the portal's."""

from jobs.enums import State

_MAP: dict[str, str] = {
    "PENDING": State.PENDING,
    "CONFIGURING": State.PENDING,  # nodes are booting for it
    "REQUEUED": State.PENDING,
    "REQUEUE_HOLD": State.PENDING,
    "REQUEUE_FED": State.PENDING,
    "RESV_DEL_HOLD": State.PENDING,
    "RUNNING": State.RUNNING,
    "SUSPENDED": State.RUNNING,
    "STOPPED": State.RUNNING,
    "SIGNALING": State.RUNNING,
    "RESIZING": State.RUNNING,
    "COMPLETING": State.COMPLETING,
    "STAGE_OUT": State.COMPLETING,
    "COMPLETED": State.COMPLETED,
    "FAILED": State.FAILED,
    "SPECIAL_EXIT": State.FAILED,
    "CANCELLED": State.CANCELLED,
    "REVOKED": State.CANCELLED,
    "TIMEOUT": State.TIMEOUT,
    "DEADLINE": State.TIMEOUT,
    "NODE_FAIL": State.NODE_FAIL,
    "BOOT_FAIL": State.NODE_FAIL,
    "PREEMPTED": State.PREEMPTED,
    "OUT_OF_MEMORY": State.OUT_OF_MEMORY,
}


def portal_state(slurm_state: str) -> str:
    """The portal state for a Slurm state (`CANCELLED by 1000` included); unknown ones stay live."""
    word = slurm_state.split()[0].rstrip("+").upper() if slurm_state.strip() else ""
    return _MAP.get(word, State.RUNNING)
