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


def sweep_gpu_hours(sweep: Sweep, firsts: list[dict[str, Choice]]) -> Decimal:
    """Every trial's GPUs x time limit: what the sweep reserves if no trial is pruned."""
    return sum(
        (
            gpu_hours_for(gpus=n * sweep.gpus_per_node, time_limit=sweep.time_limit)
            for n in trial_nodes(sweep, firsts)
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
