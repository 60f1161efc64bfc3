"""Run the metric reader over tests/corpus/metrics and compare, as tests/corpus/README.md says.

python -m tests.corpus.runner            # every case, expected vs read, then the totals
python -m tests.corpus.runner -q         # failing cases and the totals only
python -m tests.corpus.runner -k keras   # cases whose name contains `keras`
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field

from monitoring.reader import MetricReader
from tests.corpus.loader import MetricCase, Point, load_metric_cases


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


def read_case(text: str) -> list[Point]:
    """Feed the text line by line, keeping `\\r`; the last piece has no newline if the text lacks one."""
    reader = MetricReader()
    pieces = text.split("\n")
    for index, piece in enumerate(pieces):
        last = index == len(pieces) - 1
        if piece or not last:
            reader.feed(piece if last else piece + "\n")
    points: list[Point] = []
    for point in reader.finish():
        points.append(
            {"step": point.step, **point.values} if not point.counted else dict(point.values)
        )
    return points


def _same(expected: float | int, got: float | int) -> bool:
    if isinstance(expected, int) and not isinstance(expected, bool) and isinstance(got, int):
        return expected == got
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
