"""A sweep's whole GPU-hour cost, checked against its project's budget before it starts."""

from decimal import Decimal

from projects.quota import budget_refusal, fmt_hours, gpu_hours_for
from projects.selectors import project_usage
from sweeps.errors import SweepError
from sweeps.models import Sweep
from sweeps.space import NODES_KEY, Choice


def trial_nodes(sweep: Sweep, firsts: list[dict[str, Choice]]) -> list[int]:
    """Each planned trial's node count: the first trials' own, then the sweep's."""
    nodes = [int(first.get(NODES_KEY, sweep.nodes)) for first in firsts[: sweep.max_trials]]
    return nodes + [sweep.nodes] * (sweep.max_trials - len(nodes))


def sweep_gpu_hours(sweep: Sweep, firsts: list[dict[str, Choice]], *, started: int = 0) -> Decimal:
    """The GPUs x time limit of every trial after the first `started`: what the sweep
    reserves if no trial is pruned."""
    return sum(
        (
            gpu_hours_for(gpus=n * sweep.gpus_per_node, time_limit=sweep.time_limit)
            for n in trial_nodes(sweep, firsts)[started:]
        ),
        Decimal(0),
    )


def budget_check(sweep: Sweep, firsts: list[dict[str, Choice]]) -> Decimal:
    """The sweep's GPU-hours, or a SweepError when its project's budget cannot hold them all."""
    needed = sweep_gpu_hours(sweep, firsts)
    usage = project_usage(project=sweep.project)
    if usage.has_quota and needed <= usage.left_gpu_hours:
        return needed
    refusal = budget_refusal(project=sweep.project, needed=needed, usage=usage)
    message = (
        f"This sweep {refusal} ({sweep.max_trials} trials, up to "
        f"{fmt_hours(needed)} GPU-h if none is pruned): lower the number of trials, "
        "the time limit or the GPUs per trial."
    )
    raise SweepError(message, errors={"max_trials": [message]})


def resume_budget_check(sweep: Sweep, firsts: list[dict[str, Choice]], *, started: int) -> None:
    """A SweepError when the trials not started yet no longer fit the budget left.

    The running trials' attempts hold their own reservations, counted in what is left.
    """
    needed = sweep_gpu_hours(sweep, firsts, started=started)
    if not needed:
        return
    usage = project_usage(project=sweep.project)
    if usage.has_quota and needed <= usage.left_gpu_hours:
        return
    refusal = budget_refusal(project=sweep.project, needed=needed, usage=usage)
    left = sweep.max_trials - started
    raise SweepError(
        f"The sweep cannot resume: what it has still to run ({left} trial"
        f"{'s' if left != 1 else ''}) {refusal}. Stop it and start a smaller sweep, or ask "
        "an owner for more budget."
    )
