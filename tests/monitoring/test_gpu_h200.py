"""The GPU sampler's parser on the real tool's output, captured on an H200 (tests/data/h200)."""

from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from statistics import median

from monitoring.reading.gpu import parse_gpu_csv

DATA = Path(__file__).resolve().parents[1] / "data" / "h200"


def test_every_line_of_a_real_sampler_run_is_read() -> None:
    text = (DATA / "sampler.csv").read_text()
    samples, rejected = parse_gpu_csv(text)
    assert rejected == []
    assert len(samples) == len(text.splitlines()) == 34
    assert {s.uuid for s in samples} == {"GPU-04ceefcb-5cd5-f979-d029-894310900f9a"}
    assert {s.index for s in samples} == {0}
    assert {s.memory_total_mib for s in samples} == {143771.0}
    steps = [b.time - a.time for a, b in pairwise(samples)]
    assert all(timedelta(seconds=0.9) < step < timedelta(seconds=1.1) for step in steps)


def test_the_load_reads_as_busy_and_the_rest_as_idle() -> None:
    samples, _ = parse_gpu_csv((DATA / "sampler.csv").read_text())
    busy = [s for s in samples if s.utilization and s.utilization >= 99]
    idle = [s for s in samples if s.utilization == 0]
    assert len(busy) >= 15 and len(busy) + len(idle) == len(samples)
    # The first busy second ramps up (425 W); then about 690 of the 700 W cap.
    assert all(s.power_w and s.power_w > 400 for s in busy)
    assert median(s.power_w or 0 for s in busy) > 680
    assert all(s.memory_used_mib and s.memory_used_mib > 0 for s in busy)
    assert min(s.power_w or 0 for s in idle) > 70  # an idle H200 still draws ~78 W
    assert max(s.temperature_c or 0 for s in busy) > max(s.temperature_c or 0 for s in idle[:5])
