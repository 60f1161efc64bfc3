"""Diagnosis speed: logs per second on the failure corpus, and the worst 64 KiB hostile line,
beside the naive way (a `^.*X.*Y.*` pattern per whole line, as the rules were once written).

No database. Run: `.venv/bin/python bench/diagnosis.py [--quick]`. Reads the corpus files
(tests/corpus/failures) directly; it imports nothing from tests.
"""

import re
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchdb import QUICK  # noqa: E402 - after the path is set

CORPUS = ROOT / "tests" / "corpus" / "failures"
ROUNDS = 1 if QUICK else 20
LINE = 64 * 1024
NAIVE_LINE = 1024 if QUICK else 16 * 1024  # the naive way is quadratic: a shorter line
HOSTILE = {
    "spaces after step": "step " + " " * LINE,
    "digit run": "1" * LINE,
    "nested brackets": "[" * (LINE // 2) + "]" * (LINE // 2),
    "NCCL WARN repeated": "NCCL WARN " * (LINE // 10),
    "cancel prefix repeated": "*** JOB 1 ON n1 CANCELLED AT " * (LINE // 29),
    "frame prefix repeated": 'File "' * (LINE // 6),
    "warning repeated": "UserWarning: " * (LINE // 13),
    "errno phrases, no context": "Broken pipe " * (LINE // 12),
}
NAIVE = re.compile(
    r"^.*NCCL (?:WARN|INFO).*(?:Connection timed out|connect to .* failed|Connection refused).*",
    re.M,
)


def _seconds(work: Callable[[], object], repeats: int = 1) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
    import django

    django.setup()
    from monitoring.diagnosis.diagnose import diagnose

    with (CORPUS / "cases.toml").open("rb") as handle:
        cases = tomllib.load(handle)["case"]
    logs = [
        (case["slurm_state"], case["exit_code"], (CORPUS / case["file"]).read_text("utf-8"))
        for case in cases
    ]

    def corpus() -> None:
        for _ in range(ROUNDS):
            for state, code, text in logs:
                diagnose(state=state, exit_code=code, log_tail=text)

    rate = len(logs) * ROUNDS / _seconds(corpus)
    print(f"{'corpus':<28} | {len(logs)} logs x {ROUNDS} | {rate:,.0f} logs/s")
    print()
    print(f"{'hostile line':<28} | {'ours ms (64 KiB)':>16} | {'naive ms':>9} (KiB)")
    print("-" * 72)
    worst = ("", 0.0)
    for name, line in HOSTILE.items():
        tail = line[:LINE] + "\n"
        short = line[:NAIVE_LINE]

        def ours_once(text: str = tail) -> object:
            return diagnose(state="FAILED", exit_code=1, log_tail=text)

        def naive_once(text: str = short) -> object:
            return NAIVE.search(text)

        ours = _seconds(ours_once, 1 if QUICK else 3)
        naive = _seconds(naive_once)
        worst = max(worst, (name, ours), key=lambda pair: pair[1])
        print(f"{name:<28} | {ours * 1000:>16.2f} | {naive * 1000:>9.2f} ({NAIVE_LINE // 1024})")
    print("-" * 72)
    print(f"{'worst (ours)':<28} | {worst[1] * 1000:>16.2f} | {worst[0]}")


if __name__ == "__main__":
    main()
