"""The stdout metric reader: lines per second on the corpus, and the worst adversarial line;
TensorBoard event records beside it, and hostile records of 16, 32 and 64 KiB.

Pure, no database. Run: `.venv/bin/python bench/parsers.py` (`--quick`: fewer repeats).
Reads every line of tests/corpus/metrics/*.toml (read here with tomllib: benches never
import tests) with `monitoring.reading.parsers.parse_stdout_metrics`, against a naive baseline
(one plain `re` key=value scan per line, what the old parser's core did), then times
64 KiB lines of hostile shapes one at a time: by the reader alone, and by ingest's path
(`monitoring.reading.lines.read_chunk` and the parser process's request, in-process: a poll with
the line unfinished, then its end). Prints a table; a full run exits 1 when
the worst line takes 10 ms or more. Times are the process's CPU time (time.process_time):
what the reader costs, the same on a machine busy with other work.
"""

import re
import statistics
import sys
import time
import tomllib
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUICK = "--quick" in sys.argv[1:]
REPEATS = 3 if QUICK else 20
WORST_MS = 10.0
KIB64 = 64 * 1024

# After the path is set:
from monitoring.ingest.worker import parse_request, stdout_request  # noqa: E402
from monitoring.reading.lines import read_chunk  # noqa: E402
from monitoring.reading.parsers import parse_stdout_metrics  # noqa: E402
from monitoring.records.tfevents import masked_crc, read_events  # noqa: E402

# A real Lightning run's event file (tests/monitoring/fixtures/records/README.md says how made).
EVENTS = next((ROOT / "tests/monitoring/fixtures/records/lightning").glob("events.out.tfevents.*"))

# The naive baseline: key=value / key: value numbers, one regex scan per line.
_NAIVE = re.compile(r"([A-Za-z_][\w./-]*)\s*[=:]\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")


def naive(lines: list[str]) -> int:
    return sum(len(_NAIVE.findall(line)) for line in lines)


def ours(lines: list[str]) -> int:
    return len(parse_stdout_metrics(lines))


def through_ingest(line: str) -> int:
    """Ingest's path in-process: a poll brings the line unfinished (its finished `\\r`
    redraw is read), the next one ends it (lines over the parser's cap are skipped)."""
    carry, points = b"", 0
    state: dict[str, object] = {}
    for data, final in ((line.encode(), False), (b"\n", True)):
        chunk = read_chunk(carry, data, final=final)
        carry = chunk.carry
        request = stdout_request(
            chunk.lines, redraw=chunk.redraw, state=state, last_step=None, final=final
        )
        reply = parse_request(request)
        state = reply["state"]
        points += len(reply["points"])
    return points


def corpus_lines() -> list[str]:
    lines: list[str] = []
    for path in sorted((ROOT / "tests" / "corpus" / "metrics").glob("*.toml")):
        with path.open("rb") as handle:
            for case in tomllib.load(handle).get("case", []):
                lines += case["text"].split("\n")
    return [line for line in lines if line]


def adversarial() -> dict[str, str]:
    def fill(piece: str) -> str:
        return (piece * (KIB64 // len(piece) + 1))[:KIB64]

    return {
        "spaces after step": "step" + " " * (KIB64 - 4),
        "long digit run": "1" * KIB64,
        "step then digits": "step " + "9" * (KIB64 - 5),
        "nested brackets": "[" * (KIB64 // 2) + "]" * (KIB64 // 2),
        "nested dicts": "{'a': " * (KIB64 // 6),
        "nested parens": "(" * (KIB64 // 2) + ")" * (KIB64 // 2),
        "64k a=": fill("a="),
        "64k key=value": fill("loss=1.5, "),
        "64k label value": fill("lm loss 2.5 | "),
        "long \\r chain": fill("\r"),
        "\\r redraw chain": fill(" 5%|#| 5/100 [00:01<00:10, 1.0it/s, loss=0.5]\r"),
        "short redraws": fill("a\r"),
        "blank redraws": "step 1 loss 2\r" + fill(" \r")[14:],
        "thousands groups": "1" + fill(",234"),
        "exponent chain": fill("1e1"),
        "dotted number": fill("1."),
        "fractions": fill("1/"),
        "spaced fractions": fill("1 / "),
        "bar pieces": fill("5%|"),
        "dash separators": fill(" - "),
        "words": fill("word "),
        "colons": fill("a: "),
        "timestamps": fill("2024-05-01 12:00:00,123 "),
        "ansi": fill("\x1b[31m"),
        "levels": fill("INFO - "),
        "file prefixes": fill("a.py:1] "),
        "nan everywhere": fill("loss: nan "),
        "unit glue": fill("1.5GiB"),
        "quotes": fill("'"),
        "table row": fill("1.0    "),
        "header row": fill("Col    "),
    }


def _framed(body: bytes) -> bytes:
    """One TFRecord around `body`, its CRCs right."""
    length = len(body).to_bytes(8, "little")
    crc = masked_crc(length).to_bytes(4, "little")
    return length + crc + body + masked_crc(body).to_bytes(4, "little")


def events() -> None:
    """TensorBoard records per second beside the stdout reader, and hostile records by size."""
    data = EVENTS.read_bytes() * (20 if QUICK else 200)
    count = len(read_events(data).points)
    seconds = _time(partial(read_events, data), REPEATS)
    print(f"\nTensorBoard events: {len(data)} bytes, {count} scalars")
    print(f"| {'reader':<22} | {'scalars/s':>12} |")
    print(f"| {'events (protobuf)':<22} | {count / seconds:>12,.0f} |")
    print("\nhostile records: ms by size (linear: doubling the size doubles the time)")
    print(f"| {'shape':<22} | {'16 KiB':>9} | {'32 KiB':>9} | {'64 KiB':>9} |")
    shapes: dict[str, Callable[[int], bytes]] = {
        "no record start (0xff)": lambda size: b"\xff" * size,
        "framed, not an event": lambda size: _framed(b"\xff" * (size - 16)),
        "framed, bad data CRC": lambda size: _framed(b"\x00" * (size - 16))[:-1] + b"\x01",
    }
    for shape, make in shapes.items():
        cells = [_time(partial(read_events, make(k * 1024)), REPEATS) * 1000 for k in (16, 32, 64)]
        print(f"| {shape:<22} | " + " | ".join(f"{ms:>9.3f}" for ms in cells) + " |")


def _time(action: Callable[[], object], repeats: int) -> float:
    action()  # warm
    times = []
    for _ in range(repeats):
        started = time.process_time()
        action()
        times.append(time.process_time() - started)
    return statistics.median(times)


def main() -> int:
    lines = corpus_lines()
    rows = [("parser", "lines/s", "points")]
    parsers: list[tuple[str, Callable[[list[str]], int]]] = [
        ("naive re key=value", naive),
        ("general reader", ours),
    ]
    for name, parse in parsers:
        seconds = _time(partial(parse, lines), REPEATS)
        rows.append((name, f"{len(lines) / seconds:,.0f}", str(parse(lines))))
    print(f"corpus: {len(lines)} lines")
    for row in rows:
        print(f"| {row[0]:<22} | {row[1]:>12} | {row[2]:>7} |")
    worst = 0.0
    print(f"\nadversarial lines, {KIB64} characters each")
    print(f"| {'shape':<22} | {'reader ms/line':>14} | {'ingest path ms':>14} |")
    for shape, line in adversarial().items():
        repeats = max(REPEATS // 4, 1)
        ms = _time(partial(parse_stdout_metrics, [line]), repeats) * 1000
        path_ms = _time(partial(through_ingest, line), repeats) * 1000
        worst = max(worst, ms, path_ms)
        print(f"| {shape:<22} | {ms:>14.3f} | {path_ms:>14.3f} |")
    events()
    verdict = "ok" if worst < WORST_MS else "TOO SLOW"
    print(f"\nworst case {worst:.3f} ms/line (limit {WORST_MS:.0f} ms): {verdict}")
    # The suite runs every bench --quick on a busy machine: there the limit is shown, not
    # enforced (tests never assert wall-clock times); a full run enforces it.
    return 0 if worst < WORST_MS or QUICK else 1


if __name__ == "__main__":
    sys.exit(main())
