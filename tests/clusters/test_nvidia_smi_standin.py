"""The stand-in nvidia-smi, run as a subprocess exactly as jobs run it."""

import calendar
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from clusters.sandbox import nvidia_smi_summary as summary
from tests.helpers import wait_for

SCRIPT = Path(__file__).resolve().parents[2] / "clusters" / "sandbox" / "nvidia_smi.py"
TIMESTAMP = r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}"
UUID = r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
MONITOR_FIELDS = (
    "timestamp,index,uuid,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw"
)
MONITOR_LINE = re.compile(
    rf"^(?P<ts>{TIMESTAMP}), (?P<index>\d+), (?P<uuid>{UUID}), (?P<util>\d+|\[N/A\]), "
    r"(?P<used>\d+), (?P<total>\d+), (?P<temp>\d+), (?P<power>\d+\.\d\d|\[N/A\])$"
)


def nvsmi(*args: str, node: str = "n1", **env: str) -> subprocess.CompletedProcess[str]:
    # A stray PORTAL_FAKE_NVSMI_NA from the caller's shell must not leak in.
    environ = {k: v for k, v in os.environ.items() if k != "PORTAL_FAKE_NVSMI_NA"}
    environ |= {"SLURMD_NODENAME": node, **env}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=20,
        check=False,
    )


def query(fields: str, fmt: str = "csv,noheader,nounits", *extra: str, **env: str) -> list[str]:
    proc = nvsmi(f"--query-gpu={fields}", f"--format={fmt}", *extra, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()


def test_monitor_query_has_the_real_format_one_line_per_gpu():
    lines = query(MONITOR_FIELDS)
    assert len(lines) == 2
    for expected_index, line in enumerate(lines):
        m = MONITOR_LINE.match(line)
        assert m, line
        assert int(m["index"]) == expected_index
        assert 0 <= int(m["util"]) <= 100
        assert int(m["total"]) == 143771
        assert 0 <= int(m["used"]) <= 143771
        assert 30 <= int(m["temp"]) <= 85
        assert 0 < float(m["power"]) <= 700


def test_all_supported_fields():
    fields = (
        "timestamp,index,uuid,name,utilization.gpu,utilization.memory,memory.used,"
        "memory.total,memory.free,temperature.gpu,power.draw,power.limit,clocks.sm,pci.bus_id"
    )
    for line in query(fields):
        cells = line.split(", ")
        assert len(cells) == 14, line
        assert cells[3] == "NVIDIA H200"
        assert int(cells[6]) + int(cells[8]) == int(cells[7]) == 143771
        assert cells[11] == "700.00"
        assert re.fullmatch(r"\d+", cells[12])
        assert re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.\d", cells[13])


def test_uuid_is_stable_per_node_and_index():
    def uuids(node: str) -> list[str]:
        proc = nvsmi("--query-gpu=uuid", "--format=csv,noheader", node=node)
        return proc.stdout.split()

    assert uuids("n1") == uuids("n1")
    assert len(set(uuids("n1") + uuids("n2") + uuids("n3"))) == 6


def test_cuda_visible_devices_is_ignored_like_the_real_tool():
    assert len(query("index", "csv,noheader", CUDA_VISIBLE_DEVICES="1")) == 2


def test_id_restricts_gpus():
    assert query("index", "csv,noheader", "-i", "1") == ["1"]
    assert query("index", "csv,noheader", "-i", "1,0") == ["1", "0"]
    proc = nvsmi("--query-gpu=index", "--format=csv", "-i", "7")
    assert proc.returncode != 0
    assert "No devices were found" in proc.stdout


def test_units_without_nounits():
    fields = "utilization.gpu,memory.used,temperature.gpu,power.draw,clocks.sm"
    for line in query(fields, "csv,noheader"):
        assert re.fullmatch(r"\d+ %, \d+ MiB, \d+, \d+\.\d\d W, \d+ MHz", line), line


def test_csv_header_names_fields_with_units():
    lines = query("timestamp,index,utilization.gpu,memory.used,power.draw", "csv")
    assert lines[0] == "timestamp, index, utilization.gpu [%], memory.used [MiB], power.draw [W]"
    assert len(lines) == 3
    assert re.fullmatch(rf"{TIMESTAMP}, 0, \d+ %, \d+ MiB, \d+\.\d\d W", lines[1])


def test_na_field_reads_na_with_and_without_units():
    env = {"PORTAL_FAKE_NVSMI_NA": "power.draw"}
    for line in query(MONITOR_FIELDS, **env):
        m = MONITOR_LINE.match(line)
        assert m, line
        assert m["power"] == "[N/A]"
    for line in query("index,power.draw", "csv,noheader", **env):
        assert line.endswith(", [N/A]"), line


def test_invalid_field_is_rejected_like_the_real_tool():
    proc = nvsmi("--query-gpu=index,xyz", "--format=csv")
    assert proc.returncode == 2
    assert 'Field "xyz" is not a valid field to query.' in proc.stdout


def test_loop_emits_flushed_batches_until_killed():
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), f"--query-gpu={MONITOR_FIELDS}",
         "--format=csv,noheader,nounits", "-l", "1"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SLURMD_NODENAME": "n2"},
    )  # fmt: skip
    lines: list[str] = []
    try:
        # Three batches of two lines (one per GPU), each flushed when it is made, however
        # long the start took; the read blocks a second at most (then the next batch).
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while len(lines) < 6 and time.monotonic() < deadline and proc.poll() is None:
            lines.append(proc.stdout.readline().rstrip("\n"))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode is not None  # killed, it stops
    assert len(lines) == 6, lines
    assert all(MONITOR_LINE.match(line) for line in lines), lines
    stamps = sorted({line.split(", ")[0] for line in lines})
    assert len(stamps) == 3


def test_values_vary_over_time():
    first = query("utilization.gpu,power.draw")
    wait_for(lambda: query("utilization.gpu,power.draw") != first, 30, "the values to change")


def test_summary_and_list_without_query():
    proc = nvsmi()
    assert proc.returncode == 0
    assert "NVIDIA H200" in proc.stdout
    listing = nvsmi("-L").stdout.splitlines()
    assert len(listing) == 2
    assert re.fullmatch(rf"GPU 0: NVIDIA H200 \(UUID: {UUID}\)", listing[0])


# The real tool's output, captured on an H200 (tests/data/h200/README.md).
H200 = Path(__file__).resolve().parents[1] / "data" / "h200"


def test_the_real_sampler_lines_have_the_format_the_stand_in_is_held_to():
    lines = (H200 / "sampler.csv").read_text().splitlines()
    assert lines and all(MONITOR_LINE.match(line) for line in lines)


def test_the_header_with_units_is_the_real_one():
    real = (H200 / "query-units.csv").read_text().splitlines()[0]
    assert query(MONITOR_FIELDS, "csv")[0] == real


def test_the_plain_table_is_laid_out_as_the_real_one():
    real = (H200 / "nvidia-smi.txt").read_text()
    os.environ["TZ"] = "UTC"  # the capture's clock; restored below
    try:
        time.tzset()
        now = calendar.timegm((2026, 12, 4, 11, 9, 49, 0, 0, 0))
        reading = summary.Reading(
            0, "NVIDIA H200", "00000000:00:06.0", 36, 78.03, 700, 0, 143771, 0
        )
        assert summary.render([reading], now) == real
    finally:
        os.environ.pop("TZ")
        time.tzset()


def test_the_stand_in_prints_that_table_for_its_gpus():
    lines = nvsmi().stdout.splitlines()
    real = (H200 / "nvidia-smi.txt").read_text().splitlines()
    gpu_block = real[8:12]
    assert len(lines) == len(real) + len(gpu_block)  # two GPUs: one block more
    assert lines[1:8] == real[1:8] and lines[-8:] == real[-8:]
    # Each number right-aligned in its field: a GPU a job uses shows 12345MiB, an idle
    # one 0MiB, in the same columns.
    shape = [re.sub(r" *\d+", lambda m: "0".rjust(len(m[0])), line) for line in lines[8:16]]
    assert shape[:4] == shape[4:]
    assert [len(line) for line in lines[8:16]] == [len(line) for line in gpu_block * 2]
