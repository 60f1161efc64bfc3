"""`sbatch --test-only`: when the scheduler would start a job, without submitting it.

Slurm answers on stderr with one line, e.g.
`sbatch: Job 9 to start at 2026-12-06T15:51:23 using 1 processors on nodes n1 in
partition gpu`, or with the reason it could never run (`allocation failure: Requested
node configuration is not available`). The start is what the scheduler's plan says now:
running jobs are assumed to use their whole time limit.

Several asks go to the cluster as one command, so a form showing five options costs one
SSH exec: each ask runs in turn under `/bin/sh` (whatever the account's login shell is),
its output and exit status closed by a marker line.
"""

import re
import shlex
from dataclasses import dataclass
from datetime import datetime

from clusters.slurm.parsers import parse_time
from clusters.slurm.tools import SlurmTools

MARKER = "@@portal-test-only"
# Options that decide where and when a job can run; a batch script's others (output,
# name, signal) change nothing in the scheduler's answer.
SCHEDULING_OPTIONS = frozenset(
    {
        "--account",
        "--constraint",
        "--cpus-per-task",
        "--exclude",
        "--gpus",
        "--gpus-per-node",
        "--gres",
        "--mem",
        "--mem-per-cpu",
        "--nodelist",
        "--nodes",
        "--ntasks",
        "--ntasks-per-node",
        "--partition",
        "--qos",
        "--reservation",
        "--time",
    }
)
_OPTION = re.compile(r"--[a-z-]+=[A-Za-z0-9_.:,\[\]\-+]+")
_WILL_RUN = re.compile(
    r"Job \d+ to start at (?P<start>\S+) using \d+ processors on nodes (?P<nodes>\S+)"
    r"(?: in partition (?P<partition>\S+))?"
)


@dataclass(frozen=True)
class TestOnly:
    """One ask's answer: the start and where, or why Slurm would not run it."""

    __test__ = False  # not a pytest class

    start: datetime | None
    nodes: str = ""
    partition: str = ""
    error: str = ""


def scheduling_options(script: str) -> list[str]:
    """The `#SBATCH` options of a batch script that decide where and when it runs."""
    options = []
    for line in script.splitlines():
        if not line.startswith("#SBATCH "):
            continue
        for word in shlex.split(line.removeprefix("#SBATCH ")):
            if word.split("=", 1)[0] in SCHEDULING_OPTIONS:
                options.append(word)
    return options


def asks_command(asks: list[list[str]], *, tools: SlurmTools) -> str:
    """One shell command asking `sbatch --test-only` about each option list in turn."""
    parts = []
    for options in asks:
        for option in options:
            if not _OPTION.fullmatch(option) or option.split("=", 1)[0] not in SCHEDULING_OPTIONS:
                raise ValueError(f"not a scheduling option: {option!r}")
        argv = tools.wrap(["sbatch", "--test-only", *options, "--wrap=true"])
        parts.append(f"{shlex.join(argv)} 2>&1; echo {MARKER} $?")
    return shlex.join(["/bin/sh", "-c", "; ".join(parts)])


def parse_answers(text: str, *, asks: int) -> list[TestOnly]:
    """Each ask's answer from the command's output, in order; a missing one is an error."""
    answers: list[TestOnly] = []
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith(MARKER):
            answers.append(_answer(lines))
            lines = []
        elif line.strip():
            lines.append(line.strip())
    missing = TestOnly(start=None, error="Slurm did not answer")
    return (answers + [missing] * asks)[:asks]


def _answer(lines: list[str]) -> TestOnly:
    for line in lines:
        match = _WILL_RUN.search(line)
        if match:
            try:
                start = parse_time(match["start"])
            except ValueError:
                continue
            return TestOnly(start=start, nodes=match["nodes"], partition=match["partition"] or "")
    reasons = [line.removeprefix("sbatch: ").removeprefix("error: ") for line in lines]
    return TestOnly(start=None, error="; ".join(reasons)[:300] or "Slurm gave no start")
