"""Read tests/corpus/metrics as ingest reads a job's stdout and compare, as tests/corpus/README.md says.

python -m tests.corpus.runner            # every case, expected vs read, then the totals
python -m tests.corpus.runner -q         # failing cases and the totals only
python -m tests.corpus.runner -k keras   # cases whose name contains `keras`
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from typing import Any

from monitoring.ingest.worker import parse_request, stdout_request
from monitoring.reading.lines import read_chunk
from monitoring.reading.overwrite import newest_per_step
from tests.corpus.loader import MetricCase, Point, load_metric_cases

StoredPoint = tuple[int, str, float, float]  # attempt (0 here), name, step, value


@dataclass
class Result:
    case: MetricCase
    read: list[Point]
    problems: list[str] = field(default_factory=list)
    matched: int = 0
    extra: set[str] = field(default_factory=set)

    @property
    def passed(self) -> bool:
        return not self.problems


def writes(data: bytes) -> list[bytes]:
    """The text as a trainer writes it: a line per write, a `\\r` redraw per write."""
    pieces: list[bytes] = []
    start = 0
    for at, byte in enumerate(data):
        if byte == ord("\r") and at > start:
            pieces.append(data[start:at])  # a redraw begins: the write before it has ended
            start = at
        elif byte == ord("\n"):
            pieces.append(data[start : at + 1])
            start = at + 1
    return [*pieces, data[start:]] if start < len(data) else pieces


def ingest_polls(chunks: list[bytes]) -> list[StoredPoint]:
    """What ingest gives for a stdout.log that grows by these chunks, one poll each, then ends.

    The same code path as `monitoring.ingest.parse`, without the database and the process:
    `read_chunk` (the lines, and the finished redraws of a bar), the parser process's
    request and reply, the reader's state and the file's highest step carried from poll to
    poll. The points come in order, before one value per step (`newest_per_step`).
    """
    carry, high = b"", None
    state: dict[str, Any] = {}
    given: list[StoredPoint] = []
    for index in range(len(chunks) + 1):
        final = index == len(chunks)
        chunk = read_chunk(carry, b"" if final else chunks[index], final=final)
        carry = chunk.carry
        if not chunk.lines and not chunk.redraw and not final:
            continue  # ingest_parse reads nothing then
        request = stdout_request(
            chunk.lines, redraw=chunk.redraw, state=state, last_step=high, final=final
        )
        reply = parse_request(request)
        state = reply["state"]
        for name, step, value, _ in reply["points"]:
            given.append((0, name, float(step), float(value)))  # the poll reads "nan" so too
            high = step if high is None else max(high, step)
    return given


def read_case(text: str) -> list[Point]:
    """What ingest stores of the text, written one line or redraw at a time and polled after
    each (the most a live page sees): one value per step and name, grouped by step."""
    points: dict[float, Point] = {}
    for _, name, step, value in newest_per_step(ingest_polls(writes(text.encode()))):
        points.setdefault(step, {"step": int(step)})[name] = value
    return list(points.values())


def _same(expected: float | int, got: float | int) -> bool:
    if isinstance(expected, int) and not isinstance(expected, bool) and isinstance(got, int):
        return expected == got
    if math.isnan(expected):
        return math.isnan(got)  # a diverged value is read as nan, like the TOML's `nan`
    return math.isclose(float(expected), float(got), rel_tol=1e-12, abs_tol=0.0)


def compare(case: MetricCase) -> Result:
    read = read_case(case.text)
    result = Result(case, read)
    if len(read) != len(case.expect):
        result.problems.append(f"{len(read)} points read, {len(case.expect)} expected")
    for index, (want, got) in enumerate(zip(case.expect, read, strict=False)):
        ok = True
        for name, value in want.items():
            if name not in got:
                result.problems.append(f"point {index}: {name} missing (expected {value})")
                ok = False
            elif not _same(value, got[name]):
                result.problems.append(f"point {index}: {name} = {got[name]!r}, expected {value!r}")
                ok = False
        result.matched += ok
        result.extra |= {name for name in got if name not in want and name != "step"}
    for point in read:
        for name in case.not_charted:
            if name in point:
                result.problems.append(f"{name} charted ({point[name]!r}) but must not be")
    return result


def _show(point: Point) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in point.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="show failing cases only")
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    args = parser.parse_args(argv)
    results = [compare(c) for c in load_metric_cases() if args.k in c.name]
    for result in results:
        if args.quiet and result.passed:
            continue
        mark = "PASS" if result.passed else "FAIL"
        print(f"{mark} {result.case.framework}/{result.case.name}")
        for index in range(max(len(result.case.expect), len(result.read))):
            want = result.case.expect[index] if index < len(result.case.expect) else {}
            got = result.read[index] if index < len(result.read) else {}
            print(f"   expected: {_show(want)}")
            print(f"   read:     {_show(got)}")
        for problem in result.problems:
            print(f"   ! {problem}")
        if result.extra:
            print(f"   extra: {', '.join(sorted(result.extra))}")
    passed = sum(r.passed for r in results)
    matched = sum(r.matched for r in results)
    expected = sum(len(r.case.expect) for r in results)
    extra = sum(len(r.extra) for r in results)
    print(
        f"cases passed {passed} / {len(results)}, points matched {matched} / {expected}, "
        f"extra names {extra}"
    )
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
