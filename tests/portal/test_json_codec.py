"""portal_lib.json_codec: orjson where it can, the standard library where orjson refuses,
so that what was read before is still read, and values stored by the fields come back."""

import json
import math

import pytest
from django.contrib.auth.models import User

from clusters.models import Cluster
from monitoring.models import RunSummary
from portal_lib.json_codec import dumps, loads
from projects.models import Project
from tests import factories


@pytest.mark.parametrize(
    "text",
    [
        '{"step": 1, "loss": 2.5, "name": "caf\\u00e9", "nested": {"a": [1, 2.0, null, true]}}',
        '{"a": 1, "a": 2}',  # a repeated name: the last wins, as in `json`
        "[1e-05, 1e16, -0.0, 123456789012345678]",
    ],
)
def test_loads_reads_what_json_reads(text: str) -> None:
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize("text", ['{"loss": NaN}', '{"loss": Infinity}', '{"x": 1e400}'])
def test_what_orjson_refuses_and_json_takes_is_read_by_json(text: str) -> None:
    value = loads(text)["loss" if "loss" in text else "x"]
    assert not math.isfinite(value)


@pytest.mark.parametrize("text", ["", "{", '{"a": 1', "step 5 loss 2"])
def test_loads_refuses_what_is_not_json_with_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):  # json.JSONDecodeError, which callers catch
        loads(text)


@pytest.mark.parametrize(
    "value",
    [
        {"step": 3, "loss": 0.125, "names": ["a", "b"], "ok": True, "none": None},
        {1: "int keys as strings", "b": 2},
        {"big": 2**70},  # past 64 bits: orjson refuses it, json writes it
        ["caf\u00e9", "\u2603", 1e-300],
    ],
)
def test_dumps_writes_what_json_writes(value: object) -> None:
    assert json.loads(dumps(value)) == json.loads(json.dumps(value))


def test_dumps_writes_non_finite_numbers_as_null_which_jsonb_can_hold() -> None:
    assert json.loads(dumps({"loss": math.nan, "x": math.inf})) == {"loss": None, "x": None}


def test_a_json_field_stores_and_reads_back_through_postgresql(
    project: Project, member: User, cluster: Cluster
) -> None:
    job, _ = factories.job(project, member, cluster)
    metrics = {"loss": [0.5, 0.25, 2.0, 10.0], "caf\u00e9/acc": [1.0, 0.0, 1.0, 1e-9]}
    RunSummary.objects.create(job=job, project=job.project, metrics=metrics)
    assert RunSummary.objects.get(job=job).metrics == metrics
    assert RunSummary.objects.filter(job=job).values_list("metrics", flat=True)[0] == metrics
    # Read into by key, as the database sees it (a jsonb value, not text).
    assert RunSummary.objects.filter(metrics__loss__0=0.5).exists()
    RunSummary.objects.filter(job=job).update(metrics={"nan": [math.nan, 1.0, 1.0, 1.0]})
    assert RunSummary.objects.get(job=job).metrics == {"nan": [None, 1.0, 1.0, 1.0]}
