"""Making a sweep: the search, the trials' spec and the whole sweep's GPU-hours are checked
before anything is recorded; a refusal names what to change."""

from decimal import Decimal

import pytest
from django.contrib.auth.models import User

from clusters.models import Cluster
from jobs.models import Job
from portal_lib.errors import PortalError
from projects.models import Project, Quota
from sweeps.budget import sweep_gpu_hours
from sweeps.errors import SweepError
from sweeps.models import Sweep, Trial
from sweeps.space import SpaceError, command_for, distributions, first_trials_checked
from tests.sweeps.helpers import new_sweep


def test_a_sweep_that_fits_is_saved_and_starts_nothing_yet(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster)
    assert sweep.pk and sweep.state == Sweep.State.RUNNING and sweep.user == submitter
    assert not Trial.objects.exists() and not Job.objects.exists()


def test_a_sweep_over_the_budget_is_refused_before_any_trial(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("3"))
    with pytest.raises(SweepError) as refused:
        # 8 trials x 1 GPU x 30 min = 4 GPU-h, plus one trial of 2 nodes: 4.5 GPU-h.
        new_sweep(submitter, project, cluster, first_trials=[{"lr": 0.01, "nodes": 2}])
    message = refused.value.message
    assert "needs 4.5 GPU-h, 3 GPU-h left this month in project vision" in message
    assert "lower the number of trials, the time limit or the GPUs per trial" in message
    assert refused.value.errors["max_trials"]
    assert not Sweep.objects.exists() and not Job.objects.exists()


def test_the_budget_counts_each_trials_own_size() -> None:
    sweep = Sweep(max_trials=3, nodes=1, gpus_per_node=2, time_limit=Sweep().time_limit)
    # One hour each: 2 GPUs, then a first trial of 2 nodes (4 GPUs), then 2 GPUs.
    assert sweep_gpu_hours(sweep, [{"lr": 1.0, "nodes": 2}]) == Decimal(8)


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"space": {"lr": {"type": "float", "low": 0, "high": 1, "log": True}}}, "space", "log"),
        ({"space": {"nodes": [1, 2]}}, "space", "nodes"),
        ({"command": "python train.py --lr {lr} --wd {wd}"}, "command", "{wd}"),
        ({"command": "python train.py"}, "command", "Put {lr} into the command"),
        ({"first_trials": [{"lr": 5.0}]}, "first_trials", "outside its range"),
        ({"first_trials": [{"lr": 0.1, "momentum": 0.9}]}, "first_trials", "momentum"),
        ({"sampler": Sweep.Sampler.GRID}, "sampler", "list of choices"),
        ({"sampler": Sweep.Sampler.GRID, "space": {"lr": [0.1, 0.01]}}, "max_trials", "2 points"),
        ({"gpus_per_node": 8}, "gpus_per_node", "at most 2 per node"),
    ],
)
def test_what_is_wrong_is_named_by_field(
    submitter: User,
    project: Project,
    cluster: Cluster,
    overrides: dict[str, object],
    field: str,
    words: str,
) -> None:
    with pytest.raises(SweepError) as refused:
        new_sweep(submitter, project, cluster, **overrides)
    assert any(words in m for m in refused.value.errors[field]), refused.value.errors
    assert not Sweep.objects.exists()


def test_an_outsider_cannot_make_a_sweep_in_the_project(
    outsider: User, project: Project, cluster: Cluster
) -> None:
    with pytest.raises(PortalError):
        new_sweep(outsider, project, cluster)
    assert not Sweep.objects.exists()


def test_settings_go_into_the_command_shell_quoted() -> None:
    command = command_for("train.py --lr {lr} --opt {opt} ${{HOME}}", {"lr": 0.001, "opt": "a b"})
    assert command == "train.py --lr 0.001 --opt 'a b' ${{HOME}}"


def test_a_first_trial_must_be_a_point_of_the_space() -> None:
    dists = distributions({"lr": [0.1, 0.01], "layers": {"type": "int", "low": 1, "high": 4}})
    assert first_trials_checked([{"lr": 0.1, "layers": 2, "nodes": 2}], dists)[0]["nodes"] == 2
    for bad in ([{"lr": 0.5, "layers": 2}], [{"lr": 0.1, "layers": 2.5}], [{"lr": 0.1}]):
        with pytest.raises(SpaceError):
            first_trials_checked(bad, dists)
