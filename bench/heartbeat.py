"""What progress per rank costs: the trainer's `heartbeat(step)` per call, beside writing a
record each step (one pwrite), `log()` (open, append, close) and a rename-per-step heartbeat;
and the portal's side: parsing one rank's record and scanning rank-labelled log bytes.

No database, no cluster: the helper runs in this process against a temporary directory
(a local file system; NFS makes every write dearer, which is why heartbeat() writes at
most twice a second and its thread once a second).
Run: `.venv/bin/python bench/heartbeat.py [--quick]`.
"""

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchdb import QUICK  # noqa: E402 - after the path is set

CALLS = 20_000 if QUICK else 500_000
WRITES = 2_000 if QUICK else 50_000


def _per_call(work: Callable[[int], object], calls: int) -> float:
    started = time.perf_counter()
    for step in range(calls):
        work(step)
    return (time.perf_counter() - started) / calls


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="bench-heartbeat-"))
    os.environ["PORTAL_PROGRESS_DIR"] = str(directory / "progress")
    os.environ["PORTAL_METRICS_FILE"] = str(directory / "metrics.jsonl")
    os.environ["RANK"] = "0"
    from monitoring.hangs.heartbeats import log_rank_steps, parse_heartbeat
    from monitoring.on_cluster import portal_metrics

    portal_metrics.heartbeat(0)  # opens the record and starts the ticker
    record = directory / "progress" / "rank-0.json"
    rename_tmp = directory / "rename.tmp"

    def renamed(step: int) -> None:
        rename_tmp.write_text(f'{{"step": {step}, "time": {time.time()}}}')
        os.replace(rename_tmp, directory / "renamed.json")

    data = record.read_bytes().strip()
    now = time.time()
    lines = b"".join(b"[rank%d]: step %d, loss=0.5\n" % (i % 64, i) for i in range(20_000))
    rows = [
        ("heartbeat(step), per call", _per_call(portal_metrics.heartbeat, CALLS)),
        (
            "one record write (pwrite)",
            _per_call(lambda s: portal_metrics._write_progress(), WRITES),
        ),
        ("log(step, loss), per call", _per_call(lambda s: portal_metrics.log(s, loss=0.5), WRITES)),
        ("write + rename per step", _per_call(renamed, WRITES)),
        (
            "portal: parse one record",
            _per_call(lambda s: parse_heartbeat(data, rank=0, now=now), WRITES),
        ),
    ]
    started = time.perf_counter()
    steps = log_rank_steps(lines)
    scan = (time.perf_counter() - started) / (len(lines) / 2**20)
    width = max(len(name) for name, _ in rows)
    print(f"{'what':<{width}} | microseconds")
    print("-" * (width + 16))
    for name, seconds in rows:
        print(f"{name:<{width}} | {seconds * 1e6:12.2f}")
    print(
        f"{'portal: scan 1 MiB of rank lines':<{width}} | {scan * 1e6:12.0f}  ({len(steps)} ranks)"
    )
    print(f"record size on disk: {record.stat().st_size} bytes, whatever the number of steps")


if __name__ == "__main__":
    main()
