"""Pure parsers for what squeue, sacct and scontrol print, in the formats commands.py asks for.

Times are read as UTC because every command that prints them runs under `env TZ=UTC`.
"""

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from clusters.slurm.errors import SlurmOutputError

# ASCII unit separator. Slurm 22.05 does accept it (and newlines) inside job names, so
# the free-text name is the LAST field: it absorbs any separator it contains.
FIELD_SEP = "\x1f"

# squeue -O fields, name last (see FIELD_SEP); each is printed with FIELD_SEP appended.
SQUEUE_FIELDS = (
    "JobArrayID",  # 123, 123_4, 123_[0-3%2], 123+0 (het component)
    "State",
    "Reason",
    "NodeList",
    "StartTime",
    "EndTime",
    "TimeLimit",
    "exit_code",  # a raw wait(2) status: 768 is exit 3, 15 is signal 15
    "NumNodes",
    "UserName",  # with SubmitTime, what identifies a job: its tenant can change neither
    "SubmitTime",
    "Comment",
    "Name",
)
# sacct --format fields, name last; sacct puts FIELD_SEP between fields only.
SACCT_FIELDS = (
    "JobID",
    "State",
    "ExitCode",  # exit:signal, e.g. 3:0 or 0:9
    "Start",
    "End",
    "Elapsed",
    "Timelimit",
    "NNodes",
    "NodeList",
    "AllocTRES",
    "User",
    "Submit",
    "Comment",
    "JobName",
)

_NO_TIME = frozenset({"", "N/A", "Unknown", "None", "NONE", "(null)"})
_NO_LIMIT = frozenset(
    {"", "UNLIMITED", "INFINITE", "INVALID", "NONE", "N/A", "NOT_SET", "Partition_Limit"}
)
_NO_NODES = frozenset({"", "(null)", "None assigned"})
_GRES_GPU = re.compile(r"(?:^|,)gpu(?::([^:,]+?))?:(\d+)")
_TRES_GPU = re.compile(r"(?:^|,)gres/gpu(:[^=,]+)?=(\d+)")
_TRES_CPU = re.compile(r"(?:^|,)cpu=(\d+)(?:,|$)")


@dataclass(frozen=True)
class SqueueRow:
    job_id: str
    name: str
    state: str
    reason: str | None
    node_list: str
    start_time: datetime | None
    end_time: datetime | None
    time_limit: timedelta | None
    exit_code: int | None
    signal: int | None
    comment: str
    node_count: int
    user: str = ""  # blank only in output captured before the field was asked for
    submit_time: datetime | None = None

    @property
    def base_job_id(self) -> str:
        """The id before an array task (`_`) or het component (`+`) suffix."""
        return re.split(r"[_+]", self.job_id, maxsplit=1)[0]


@dataclass(frozen=True)
class SacctRow:
    job_id: str
    name: str
    state: str
    exit_code: int | None
    signal: int | None
    start_time: datetime | None
    end_time: datetime | None
    elapsed: timedelta | None
    time_limit: timedelta | None
    node_count: int
    node_list: str
    gpus: int
    comment: str
    cpus: int = 0  # AllocTRES cpu=: every node's together
    user: str = ""
    submit_time: datetime | None = None

    def as_squeue_row(self) -> SqueueRow:
        return SqueueRow(
            job_id=self.job_id,
            name=self.name,
            state=self.state,
            reason=None,
            node_list=self.node_list,
            start_time=self.start_time,
            end_time=self.end_time,
            time_limit=self.time_limit,
            exit_code=self.exit_code,
            signal=self.signal,
            comment=self.comment,
            node_count=self.node_count,
            user=self.user,
            submit_time=self.submit_time,
        )


def parse_time(text: str) -> datetime | None:
    """`2026-12-01T01:05:07` (printed under TZ=UTC) as an aware datetime; None for N/A etc."""
    if text in _NO_TIME:
        return None
    # fromisoformat is ~10x faster than strptime, which matters at thousands of rows a poll.
    if len(text) != 19 or text[10] != "T":
        raise ValueError(f"not a Slurm time: {text!r}")
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def parse_time_limit(text: str) -> timedelta | None:
    """A Slurm duration (`30`, `30:00`, `2:00:00`, `1-00:00:00`, `1-12`); None when unlimited.

    None also covers INVALID and NOT_SET: Slurm knows no limit for the job yet.
    """
    text = text.strip()
    if text in _NO_LIMIT:
        return None
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if match is None:
        raise ValueError(f"not a Slurm time limit: {text!r}")
    days, first, second, third = match.groups()
    parts = [int(part) for part in (first, second, third) if part is not None]
    try:
        if days is not None:  # days-hours[:minutes[:seconds]]
            hours, minutes, seconds = (*parts, 0, 0)[:3]
            return timedelta(days=int(days), hours=hours, minutes=minutes, seconds=seconds)
        if len(parts) == 1:  # minutes
            return timedelta(minutes=parts[0])
        if len(parts) == 2:  # minutes:seconds
            return timedelta(minutes=parts[0], seconds=parts[1])
        return timedelta(hours=parts[0], minutes=parts[1], seconds=parts[2])
    except OverflowError as exc:  # past timedelta's 999999999 days
        raise ValueError(f"time limit out of range: {text[:40]!r}") from exc


def normalise_state(text: str) -> str:
    """`CANCELLED by 1000` is CANCELLED; other states pass through in upper case."""
    words = text.split()
    return words[0].upper() if words else ""


def gpus_from_gres(text: str) -> int:
    """GPUs in a Gres or GresUsed value: `gpu:2`, `gpu:h100:8(S:0-1)`, `gpu:h100:1(IDX:0)`."""
    return sum(int(count) for _type, count in _GRES_GPU.findall(text))


def gpus_from_tres(text: str) -> int:
    """GPUs in a TRES string (`cpu=2,gres/gpu=1`); the untyped total wins over typed entries."""
    found = _TRES_GPU.findall(text)
    untyped = [int(count) for gpu_type, count in found if not gpu_type]
    return untyped[0] if untyped else sum(int(count) for _type, count in found)


def cpus_from_tres(text: str) -> int:
    """CPUs in a TRES string (`billing=2,cpu=2,mem=6026M,node=1`); 0 when it names none."""
    found = _TRES_CPU.search(text)
    return int(found[1]) if found else 0


def _wait_status(text: str) -> tuple[int | None, int | None]:
    if not text:
        return None, None
    status = int(text)
    signal = status & 0x7F
    return (status >> 8) & 0xFF, signal or None


def _exit_signal(text: str) -> tuple[int | None, int | None]:
    if not text:
        return None, None
    exit_code, _, signal = text.partition(":")
    return int(exit_code), int(signal or 0) or None


def _field_error(command: str, fields: tuple[str, ...], record: str) -> SlurmOutputError:
    return SlurmOutputError(
        command,
        f"expected {len(fields)} fields separated by \\x1f ({', '.join(fields)}), "
        f"got {record.count(FIELD_SEP) + 1}: {record[:300]!r}",
    )


def parse_squeue(text: str, *, fields: tuple[str, ...] = SQUEUE_FIELDS) -> list[SqueueRow]:
    """Rows of `squeue_argv()` output; a record with too few fields raises SlurmOutputError.

    Records end with FIELD_SEP plus a newline, so a newline inside a job name is kept.
    A wrong field count means truncated output or format drift: failing loudly beats
    silently losing a job, which the caller would take for a finished one. `fields`:
    the format the output was printed in (output captured before a field was added).
    """
    records = text.split(FIELD_SEP + "\n")
    tail = records.pop().rstrip("\n").removesuffix(FIELD_SEP)
    if tail:  # output whose final terminator was cut off
        records.append(tail)
    rows = []
    for record in records:
        values = record.split(FIELD_SEP, maxsplit=len(fields) - 1)
        if len(values) != len(fields):
            raise _field_error("squeue", fields, record)
        field = dict(zip(fields, values, strict=True))
        try:
            exit_code, signal = _wait_status(field["exit_code"])
            reason, nodes, comment = field["Reason"], field["NodeList"], field["Comment"]
            rows.append(
                SqueueRow(
                    job_id=field["JobArrayID"],
                    name=field["Name"],
                    state=normalise_state(field["State"]),
                    reason=None if reason in ("", "None") else reason,
                    node_list="" if nodes in _NO_NODES else nodes,
                    start_time=parse_time(field["StartTime"]),
                    end_time=parse_time(field["EndTime"]),
                    time_limit=parse_time_limit(field["TimeLimit"]),
                    exit_code=exit_code,
                    signal=signal,
                    comment="" if comment == "(null)" else comment,
                    node_count=int(field["NumNodes"]),
                    user=field.get("UserName", ""),
                    submit_time=parse_time(field.get("SubmitTime", "")),
                )
            )
        except ValueError as exc:
            raise SlurmOutputError("squeue", f"{exc} in {record[:300]!r}") from exc
    return rows


def parse_sacct(text: str, *, fields: tuple[str, ...] = SACCT_FIELDS) -> list[SacctRow]:
    """Rows of `sacct_argv()` output (--parsable2, FIELD_SEP between fields).

    A line with too few fields continues the previous record's job name (a name with a
    newline in it); one before any record raises SlurmOutputError. `fields` as for
    parse_squeue.
    """
    records: list[str] = []
    for line in text.rstrip("\n").split("\n") if text.strip() else []:
        if line.count(FIELD_SEP) >= len(fields) - 1:
            records.append(line)
        elif records:
            records[-1] += "\n" + line
        else:
            raise _field_error("sacct", fields, line)
    rows = []
    for record in records:
        field = dict(zip(fields, record.split(FIELD_SEP, maxsplit=len(fields) - 1), strict=True))
        try:
            exit_code, signal = _exit_signal(field["ExitCode"])
            nodes, tres = field["NodeList"], field["AllocTRES"]
            rows.append(
                SacctRow(
                    job_id=field["JobID"],
                    name=field["JobName"],
                    state=normalise_state(field["State"]),
                    exit_code=exit_code,
                    signal=signal,
                    start_time=parse_time(field["Start"]),
                    end_time=parse_time(field["End"]),
                    elapsed=parse_time_limit(field["Elapsed"]),
                    time_limit=parse_time_limit(field["Timelimit"]),
                    node_count=int(field["NNodes"] or 0),
                    node_list="" if nodes in _NO_NODES else nodes,
                    gpus=gpus_from_tres(tres),
                    comment=field["Comment"],
                    cpus=cpus_from_tres(tres),
                    user=field.get("User", ""),
                    submit_time=parse_time(field.get("Submit", "")),
                )
            )
        except ValueError as exc:
            raise SlurmOutputError("sacct", f"{exc} in {record[:300]!r}") from exc
    return rows
