"""The stand-in nvidia-smi's GPU fault fields, and the faults file that makes a node faulty."""

import json
import time
from pathlib import Path

from clusters.sandbox.nvidia_smi_faults import faults_written
from jobs.rundir import GPU_QUERY_FIELDS
from monitoring.reading.gpu import parse_gpu_csv
from tests.clusters.test_nvidia_smi_standin import query

FAULT_FIELDS = "index,ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.volatile.total,retired_pages.pending"


def _faults(tmp_path: Path, entries: dict[str, object]) -> dict[str, str]:
    path = tmp_path / "nvidia-smi-faults.json"
    path.write_text(json.dumps(entries))
    return {"PORTAL_FAKE_NVSMI_FAULTS": str(path)}


def test_a_healthy_h200_reads_no_errors_and_no_page_retirement(tmp_path: Path) -> None:
    lines = query(FAULT_FIELDS, **_faults(tmp_path, {}))
    assert lines == ["0, 0, 0, [N/A]", "1, 0, 0, [N/A]"]
    header = query(FAULT_FIELDS, "csv", **_faults(tmp_path, {}))[0]
    assert header == (
        "index, ecc.errors.uncorrected.volatile.total, ecc.errors.corrected.volatile.total,"
        " retired_pages.pending"
    )


def test_a_faulty_nodes_counts_grow_with_time_on_its_faulty_gpus_only(tmp_path: Path) -> None:
    since = time.time() - 100
    env = _faults(
        tmp_path,
        {
            "n1": {
                "uncorrected_every_s": 10,
                "corrected_every_s": 1,
                "since": since,
                "gpus": [1],
                "retired_pages_pending": "Yes",
            },
            "n2": {"uncorrected_every_s": 1, "since": since},
        },
    )
    gpu0, gpu1 = (line.split(", ") for line in query(FAULT_FIELDS, **env))
    assert gpu0 == ["0", "0", "0", "[N/A]"]
    assert gpu1[0] == "1" and gpu1[3] == "Yes"
    assert 10 <= int(gpu1[1]) <= 11 and 100 <= int(gpu1[2]) <= 110
    # The portal's own sampler query: every line parses, the faults where they are.
    samples, rejected = parse_gpu_csv("\n".join(query(",".join(GPU_QUERY_FIELDS), **env)))
    assert rejected == []
    assert [s.ecc_uncorrected for s in samples] == [0, int(gpu1[1])]
    assert [s.retired_pages_pending for s in samples] == [None, True]


def test_faults_under_a_run_directory_reach_only_the_samplers_of_jobs_there(
    tmp_path: Path,
) -> None:
    entry = {"uncorrected_every_s": 1, "since": time.time() - 50, "under": "/runs/t1-gw0"}
    env = _faults(tmp_path, {"n1": entry})
    mine = query(FAULT_FIELDS, PORTAL_RUN_DIR="/runs/t1-gw0/1/abc", **env)
    theirs = query(FAULT_FIELDS, PORTAL_RUN_DIR="/runs/t1-gw01/2/def", **env)
    assert all(int(line.split(", ")[1]) >= 50 for line in mine)
    assert all(line.split(", ")[1] == "0" for line in theirs)
    # A cluster's run directories under the account's home, as the sandbox's (~/portal-runs).
    home = {"HOME": "/home/alice"}
    env = _faults(tmp_path, {"n1": {**entry, "under": "~/portal-runs/t1-gw0"}})
    at_home = query(FAULT_FIELDS, PORTAL_RUN_DIR="/home/alice/portal-runs/t1-gw0/3", **env, **home)
    assert all(int(line.split(", ")[1]) >= 50 for line in at_home)


def test_an_unreadable_faults_file_leaves_the_node_healthy(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-smi-faults.json"
    path.write_text("{not json")
    lines = query(FAULT_FIELDS, PORTAL_FAKE_NVSMI_FAULTS=str(path))
    assert lines == ["0, 0, 0, [N/A]", "1, 0, 0, [N/A]"]


def test_each_tests_own_file_beside_the_stand_in_counts_and_goes_away(tmp_path: Path) -> None:
    env = _faults(tmp_path, {})  # the shared file names no node
    since = time.time() - 30
    mine = {"n1": {"uncorrected_every_s": 1, "since": since}}
    with (
        faults_written(tmp_path, "t1-gw0", mine),
        faults_written(tmp_path, "t1-gw1", {"n2": {"uncorrected_every_s": 1}}),
    ):
        assert all(int(line.split(", ")[1]) >= 30 for line in query(FAULT_FIELDS, **env))
    assert query(FAULT_FIELDS, **env) == ["0, 0, 0, [N/A]", "1, 0, 0, [N/A]"]
    assert list((tmp_path / "nvidia-smi-faults.json.d").iterdir()) == []
