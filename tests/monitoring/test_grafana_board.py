"""The Grafana board (deploy/grafana/portal.json): every query reads only metrics /metrics
serves, and the JSON passes Grafana's own published schema.

The schema check is `@grafana/schema` (Grafana Labs' dashboard and panel-plugin types)
applied by the TypeScript compiler (devtools/board_schema.py, tools pinned in
devtools/grafana); the tests below also check what the schema cannot say (unique ids,
panels that do not overlap, variables that exist). The sandbox test runs every query in a
real Prometheus (tests/e2e/test_prometheus.py).
"""

import copy
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from prometheus_client.parser import text_string_to_metric_families

from clusters.models import Cluster
from devtools.board_schema import board_errors
from projects.models import Project
from tests import factories
from tests.board import all_panels, board_exprs, load_board, metric_names, variables
from tests.helpers import METRICS_TOKEN, bearer

ROOT = Path(__file__).resolve().parent.parent.parent
SECRET_FILE = "/run/secrets/portal_metrics_token"
SUFFIXES = {"counter": ["_total"], "summary": ["_sum", "_count", ""], "gauge": [""]}
PANEL_TYPES = {"row", "timeseries", "stat", "gauge", "table", "bargauge", "text"}
VARIABLE_TYPES = {"query", "datasource", "custom", "constant", "interval", "textbox"}


def served_names(text: str) -> set[str]:
    return {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in SUFFIXES[family.type]
    }


@pytest.mark.django_db
def test_every_query_of_the_board_reads_metrics_the_endpoint_serves(
    project: Project, owner: User, cluster: Cluster, settings
) -> None:
    settings.PORTAL_METRICS_TOKEN = METRICS_TOKEN
    factories.running_attempt(project, owner, cluster)
    answer = bearer(METRICS_TOKEN).get("/metrics")
    assert answer.status_code == 200
    served = served_names(answer.content.decode())
    exprs = board_exprs(load_board())
    assert len(exprs) > 20
    read = set()
    for expr in exprs:
        names = metric_names(expr)
        assert names, expr
        assert names <= served, (expr, names - served)
        read |= names
    # The board shows each part: health, clusters, a job.
    assert {"portal_cluster_poll_lag_seconds", "portal_cluster_gpus_free"} <= read
    assert {"portal_job_gpu_utilization_ratio", "portal_celery_queue_messages"} <= read


def test_the_metric_name_reader_is_not_fooled_by_functions_matchers_or_label_lists() -> None:
    expr = (
        'sum by (cluster, job) (rate(portal_a_total{job=~"$job", x="rate(b)"}[$__rate_interval]))'
        " / on (cluster) group_left portal_b > bool 0 unless portal_c offset 5m"
    )
    assert metric_names(expr) == {"portal_a_total", "portal_b", "portal_c"}
    assert metric_names("time() - portal_d") == {"portal_d"}


def test_the_board_passes_grafanas_published_dashboard_schema() -> None:
    assert board_errors(load_board()) == []


def _rename(panel: dict[str, Any], old: str, new: str) -> None:
    panel[new] = panel.pop(old)


# Each breaks one thing and names what the error must point at.
BREAKAGES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a misspelt panel field": (
        lambda b: _rename(b["panels"][1], "gridPos", "gridpos"),
        "at .gridpos: TS2353",
    ),
    "a string where the schema has a number": (
        lambda b: b.update(schemaVersion="39"),
        "the board, at .schemaVersion: TS2322",
    ),
    "a value outside an enum": (
        lambda b: b.update(graphTooltip=5),
        "the board, at .graphTooltip",
    ),
    "a row without its panels list": (lambda b: b["panels"][0].pop("panels"), "type row)"),
    "a plugin option outside its enum": (
        lambda b: b["panels"][1]["fieldConfig"]["defaults"].update(custom={"drawStyle": "dots"}),
        "fieldConfig.defaults.custom, at .drawStyle",
    ),
    "a panel type no plugin has": (
        lambda b: b["panels"][1].update(type="timeserie"),
        "type timeserie): no panel plugin",
    ),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_the_schema_check_refuses_a_broken_copy_of_the_board(breakage: str) -> None:
    board = copy.deepcopy(load_board())
    break_it, expected = BREAKAGES[breakage]
    break_it(board)
    errors = board_errors(board)
    assert len(errors) >= 1
    assert any(expected in error for error in errors), errors


def test_the_board_has_what_the_schema_cannot_say() -> None:
    board = load_board()
    assert isinstance(board["title"], str) and board["title"]
    assert isinstance(board["uid"], str) and 0 < len(board["uid"]) <= 40
    assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36
    assert board["time"]["from"] and board["time"]["to"]
    assert board.get("id") is None  # a provisioned board gets its id from Grafana
    names = set()
    for variable in board["templating"]["list"]:
        assert variable["type"] in VARIABLE_TYPES, variable
        assert variable["name"] not in names
        names.add(variable["name"])
    assert {"datasource", "cluster", "job"} <= names
    ids = [p["id"] for p in all_panels(board)]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) for i in ids)
    for panel in all_panels(board):
        assert panel["type"] in PANEL_TYPES, panel["type"]
        assert isinstance(panel["title"], str) and panel["title"]
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in ("h", "w", "x", "y")), grid
        assert grid["h"] > 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, grid
        if panel["type"] == "row":
            assert isinstance(panel["panels"], list) and isinstance(panel["collapsed"], bool)
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
            assert variables(target["expr"]) <= names | {"__rate_interval"}, target["expr"]
    # Panels of one row do not overlap.
    cells = set()
    for panel in all_panels(board):
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, panel["title"]
                cells.add((x, y))


def test_the_compose_stack_mounts_the_board_and_a_prometheus_config_promtool_accepts(
    tmp_path: Path,
) -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for service in ("prometheus", "grafana"):
        for volume in compose["services"][service]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), volume
    assert compose["secrets"]["portal_metrics_token"] == {"environment": "PORTAL_METRICS_TOKEN"}
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian's prometheus) is not installed")
    token = tmp_path / "token"
    token.write_text("x")
    config = (ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text()
    assert SECRET_FILE in config
    (tmp_path / "prometheus.yml").write_text(config.replace(SECRET_FILE, str(token)))
    checked = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
