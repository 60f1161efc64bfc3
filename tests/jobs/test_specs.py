from datetime import timedelta

import pytest

from jobs.enums import Template
from jobs.specs import validate_spec
from projects.models import Quota
from tests.factories import GPU_PARTITION, spec

PARTITIONS = {"gpu": GPU_PARTITION}


def _errors(quota: Quota | None = None, **overrides: object) -> dict[str, list[str]]:
    return validate_spec(spec=spec(**overrides), partitions=PARTITIONS, quota=quota)


def test_a_good_spec_has_no_errors() -> None:
    assert _errors() == {}


@pytest.mark.parametrize(
    ("overrides", "field", "needle"),
    [
        ({"gpus_per_node": 4}, "gpus_per_node", "ask for at most 2 per node"),
        ({"nodes": 3}, "nodes", "has 2 nodes"),
        ({"cpus_per_task": 64}, "cpus_per_task", "have 2 CPUs"),
        ({"memory_mb": 10**6}, "memory_mb", "have 8000 MB"),
        ({"time_limit": timedelta(days=2)}, "time_limit", "allows at most 24 h"),
        ({"time_limit": timedelta(0)}, "time_limit", "positive time limit"),
        ({"partition": "cpu"}, "partition", "no partition 'cpu'; choose one of gpu"),
        ({"partition": "gpu;rm"}, "partition", "only letters"),
        ({"command": "  "}, "command", "Enter the command"),
        ({"command": "a\x00b"}, "command", "NUL"),
        (
            {"template": Template.TORCHRUN, "command": "train.py\nrm -rf ~"},
            "command",
            "give one line",
        ),
    ],
)
def test_each_error_names_what_to_change(overrides, field: str, needle: str) -> None:
    errors = _errors(**overrides)
    assert field in errors, errors
    assert any(needle in message for message in errors[field]), errors[field]


def test_project_limits_apply(project) -> None:
    quota = project.quota  # max 4 GPUs per job, 12 h
    errors = _errors(quota=quota, nodes=2, gpus_per_node=2, time_limit=timedelta(hours=13))
    assert errors["time_limit"] == [
        "The project allows at most 12 h per job; shorten the time limit."
    ]
    errors = _errors(quota=quota, nodes=2, gpus_per_node=2)
    assert errors == {}
    quota.max_gpus_per_job = 3
    errors = _errors(quota=quota, nodes=2, gpus_per_node=2)
    assert errors["gpus_per_node"] == [
        "This job asks for 4 GPUs; the project allows at most 3 per job."
    ]


def test_blank_partition_uses_the_default() -> None:
    assert _errors(partition="", gpus_per_node=4)["gpus_per_node"]


def test_spec_from_job_round_trips_what_clone_needs(project, owner) -> None:
    from jobs.specs import spec_from_job
    from tests.factories import cluster
    from tests.factories import job as make_job

    original, _ = make_job(
        project, owner, cluster(), model_params=7_000_000, metric_patterns="acc=(?P<acc>[0-9.]+)"
    )
    copied = spec_from_job(original)
    assert copied.command == original.command
    assert copied.model_params == 7_000_000
    assert copied.metric_patterns == "acc=(?P<acc>[0-9.]+)"
    assert copied.time_limit == original.time_limit


def test_bad_metric_pattern_and_model_size_name_the_field() -> None:
    from dataclasses import replace

    from jobs.specs import validate_spec
    from tests.factories import spec as make_spec

    bad = replace(make_spec(), metric_patterns="no groups here", model_params=0)
    errors = validate_spec(spec=bad, partitions={}, quota=None)
    assert "named groups" in errors["metric_patterns"][0]
    assert "parameter count" in errors["model_params"][0]


def test_a_hang_policy_below_its_minimum_names_the_field() -> None:
    errors = _errors(hang_multiple=0.5, hang_floor_seconds=0, startup_window_seconds=None)
    assert set(errors) == {"hang_multiple", "hang_floor_seconds"}
    assert "leave it blank for the portal's default" in errors["hang_floor_seconds"][0]
    assert not _errors(hang_multiple=3.0, hang_floor_seconds=60, startup_window_seconds=600)
