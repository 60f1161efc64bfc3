"""The runs table of a project: runs with their settings and stored summary metrics.

Columns are the job's own (name, tags, group, user, state, created), the summary's
(RunSummary, stored by the poll) and any parameter (`p.<key>`). Every column filters
(`loss_best<2.5`, `p.lr=0.001`, `state!=FAILED`, `name~llama`, `tags=baseline`: has the
tag, `group=seeds`) and all but tags sort; pages are LIMIT/OFFSET
with a capped count. A page costs the same few queries whatever the project's size:
the keys of the newest runs' settings, the capped count, and the rows with their
summaries in one join.
"""

import re
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import F, Q, QuerySet
from django.db.models.expressions import OrderBy
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.utils.dateparse import parse_date, parse_datetime

from jobs.enums import State
from jobs.models import Job
from jobs.notes import is_label
from jobs.params import param_from_text
from monitoring.models.runs import SUMMARY_COLUMNS
from portal_lib.bounds import INT_MAX
from portal_lib.units import rate_unit
from projects.models import Project

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
COUNT_CAP = 1_000  # past it the page says 1,000+: counting 10,000 matches costs 100 ms
KEYS_FROM_NEWEST = 500  # the parameter columns offered: keys of the newest runs
MAX_FILTERS = 10

# Column key -> (title, ORM path or None for a parameter).
BASE_COLUMNS: dict[str, tuple[str, str]] = {
    "name": ("Run", "name"),
    "tags": ("Tags", "tags"),
    "group": ("Group", "group"),
    "user": ("User", "user__username"),
    "state": ("State", "state"),
    "created": ("Created", "created_at"),
    "loss_last": ("Loss (last)", "summary__loss_last"),
    "loss_best": ("Loss (best)", "summary__loss_best"),
    "eval_best": ("Best eval", "summary__eval_best"),
    "throughput": ("Throughput", "summary__throughput"),  # each cell says its unit: tokens/s...
    "mfu": ("MFU (%)", "summary__mfu"),
    "gpu_hours": ("GPU-hours", "summary__gpu_hours"),
    "duration": ("Duration (h:mm)", "summary__duration_seconds"),
}
assert {p.removeprefix("summary__") for _, p in BASE_COLUMNS.values() if "summary__" in p} == {  # noqa: S101 - one list of summary columns
    *SUMMARY_COLUMNS
}
SUMMARY_SORTS = frozenset(
    k for k, (_, path) in BASE_COLUMNS.items() if path.startswith("summary__")
)
DEFAULT_COLUMNS = (
    "name",
    "tags",
    "group",
    "state",
    "loss_last",
    "loss_best",
    "eval_best",
    "throughput",
    "mfu",
)
DEFAULT_TAIL = ("gpu_hours", "duration")
TEXT_COLUMNS = frozenset({"name", "group", "user", "state"})
# A set of labels has no order to sort by; it filters (tags=x: has the tag).
UNSORTED = frozenset({"tags"})
PARAM_PREFIX = "p."
_FILTER = re.compile(r"^\s*([\w.\-/]+?)\s*(<=|>=|!=|=|<|>|~)\s*(.*?)\s*$")


class RunsQueryError(ValueError):
    """A column or filter the table cannot read; the message says what to write.

    `param` is the query parameter at fault: f (a filter), sort, page or size.
    """

    def __init__(self, message: str, *, param: str = "f") -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Filter:
    column: str
    op: str
    value: str


@dataclass
class RunsQuery:
    columns: list[str]
    sort: str = "created"
    descending: bool = True
    filters: list[Filter] = field(default_factory=list)
    page: int = 1
    page_size: int = PAGE_SIZE


def parse_filter(text: str) -> Filter:
    """`loss_best<2.5`, `p.lr=0.001`, `name~llama` into a Filter, its value checked too."""
    found = _FILTER.match(text)
    if found is None or not _known(found.group(1)):
        raise RunsQueryError(
            f"Cannot read the filter {text[:80]!r}: write column, operator (= != < <= > >= ~) "
            "and value, e.g. loss_best<2.5 or p.lr=0.001."
        )
    flt = Filter(*found.groups())
    _condition(flt, "_p")  # a value the column cannot compare with fails here, not in SQL
    return flt


def _known(column: str) -> bool:
    return column in BASE_COLUMNS or (column.startswith(PARAM_PREFIX) and len(column) > 2)


def runs_query_from(params: Any, *, param_keys: list[str]) -> RunsQuery:
    """The table's state from a query string (a QueryDict or dict of lists)."""
    raw_columns = [c for c in (params.get("cols") or "").split(",") if c]
    columns = [c for c in raw_columns if _known(c)] or default_columns(param_keys)
    sort = params.get("sort") or "-created"
    descending = sort.startswith("-")
    sort = sort.lstrip("-")
    if not _known(sort):
        raise RunsQueryError(f"Cannot sort by {sort[:80]!r}: choose a column.", param="sort")
    if sort in UNSORTED:
        raise RunsQueryError("Runs do not sort by tags; filter them: tags=baseline.", param="sort")
    filters = [parse_filter(f) for f in params.getlist("f")[:MAX_FILTERS] if f.strip()]
    try:
        page = max(int(params.get("page") or 1), 1)
        size = min(max(int(params.get("size") or PAGE_SIZE), 1), MAX_PAGE_SIZE)
    except ValueError as exc:
        raise RunsQueryError("Give page and size as whole numbers.", param="page") from exc
    if page > INT_MAX:
        raise RunsQueryError(f"Give a page number up to {INT_MAX}.", param="page")
    return RunsQuery(columns, sort, descending, filters, page, size)


def default_columns(param_keys: list[str]) -> list[str]:
    return [*DEFAULT_COLUMNS, *(PARAM_PREFIX + k for k in param_keys[:4]), *DEFAULT_TAIL]


@dataclass(frozen=True)
class Vocabulary:
    """What the newest runs of a project name: setting keys, tags and groups, each sorted."""

    param_keys: list[str]
    tags: list[str]
    groups: list[str]


def vocabulary(*, project: Project) -> Vocabulary:
    """The settings, tags and groups of the project's newest runs (one bounded query)."""
    newest = Job.objects.filter(project=project).order_by("-created_at", "-id")
    keys: set[str] = set()
    tags: set[str] = set()
    groups: set[str] = set()
    for params, run_tags, group in newest.values_list("params", "tags", "group")[:KEYS_FROM_NEWEST]:
        keys.update(params or {})
        tags.update(run_tags or ())
        groups.add(group)
    groups.discard("")
    return Vocabulary(sorted(keys), sorted(tags), sorted(groups))


def param_keys(*, project: Project) -> list[str]:
    """The setting names of the project's newest runs, sorted (one bounded query)."""
    return vocabulary(project=project).param_keys


def _expression(column: str) -> Any:
    if column.startswith(PARAM_PREFIX):
        return KeyTransform(column[len(PARAM_PREFIX) :], "params")
    return F(BASE_COLUMNS[column][1])


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError as exc:
        raise RunsQueryError(
            f"{text[:40]!r} is not a number; compare numbers with < and >."
        ) from exc


def _condition(flt: Filter, alias: str) -> Q:
    if flt.column.startswith(PARAM_PREFIX):
        return _param_condition(flt.column[len(PARAM_PREFIX) :], flt.op, flt.value, alias)
    if flt.column == "tags":
        return _tag_condition(flt.op, flt.value)
    path = BASE_COLUMNS[flt.column][1]
    if flt.op == "~":
        return Q(**{f"{path}__icontains": flt.value})
    if flt.column in TEXT_COLUMNS:
        value = flt.value.upper() if flt.column == "state" else flt.value
        if flt.column == "state" and value not in State.values:
            raise RunsQueryError(
                f"No state {flt.value!r}; choose one of {', '.join(State.values)}."
            )
        if flt.op in ("=", "!="):
            return ~Q(**{path: value}) if flt.op == "!=" else Q(**{path: value})
        raise RunsQueryError(f"Compare {flt.column} with =, != or ~.")
    if flt.column == "created":
        lookups = {"<": "lt", "<=": "lte", ">": "gt", ">=": "gte", "=": "date"}
        try:
            readable = parse_datetime(flt.value) or parse_date(flt.value)
        except ValueError:  # well formed, no such day: 2026-02-30
            readable = None
        if flt.op not in lookups or readable is None:
            raise RunsQueryError("Compare created with a date: created>=2026-11-01.")
        return Q(**{f"{path}__{lookups[flt.op]}": flt.value})
    number = _number(flt.value)
    compare = {"<": "lt", "<=": "lte", ">": "gt", ">=": "gte", "=": "exact"}
    if flt.op == "!=":
        return ~Q(**{path: number})
    return Q(**{f"{path}__{compare[flt.op]}": number})


def _tag_condition(op: str, text: str) -> Q:
    if op == "~":
        return Q(tags__icontains=text)
    tag = text.lower()  # tags are kept lower-case (jobs.notes)
    if op not in ("=", "!=") or not is_label(tag):
        raise RunsQueryError(
            "Filter tags with = (has the tag), != (has not) or ~ (a tag contains), "
            "and a tag of letters, digits, '-', '_' and '.': tags=baseline."
        )
    if connection.vendor == "postgresql":  # tags @> '["x"]': the GIN index
        has = Q(tags__contains=[tag])
    else:  # SQLite has no JSON containment; a tag's characters never include a quote
        has = Q(tags__icontains=f'"{tag}"')
    return ~has if op == "!=" else has


def _param_condition(key: str, op: str, text: str, alias: str) -> Q:
    value = param_from_text(text)
    if op == "~":
        return Q(params__has_key=key) & Q(**{f"{alias}_text__icontains": text})
    if op in ("=", "!="):
        if connection.vendor == "postgresql":  # params @> {...}: the GIN index
            equal = Q(params__contains={key: value})
        else:
            equal = Q(**{alias: value})
        return ~equal if op == "!=" else equal
    if isinstance(value, bool | str):
        raise RunsQueryError(f"Compare p.{key} with < or > against a number.")
    lookups = {"<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}
    # JSON comparison: numbers compare as numbers, and a text value never matches.
    return Q(**{f"{alias}__{lookups[op]}": value})


def runs_filtered(*, project: Project, filters: list[Filter]) -> QuerySet[Job]:
    """The project's runs that pass every filter, unordered."""
    runs = Job.objects.filter(project=project)
    for number, flt in enumerate(filters):
        alias = f"_p{number}"  # one alias per filter: two filters may name two keys
        if flt.column.startswith(PARAM_PREFIX):
            key = flt.column[len(PARAM_PREFIX) :]
            runs = runs.alias(
                **{
                    alias: KeyTransform(key, "params"),
                    f"{alias}_text": KeyTextTransform(key, "params"),
                }
            )
        runs = runs.filter(_condition(flt, alias))
    return runs


def runs_queryset(*, project: Project, query: RunsQuery) -> QuerySet[Job]:
    """The project's runs, filtered and sorted (not yet paged)."""
    runs = runs_filtered(project=project, filters=query.filters)
    expression = _expression(query.sort)
    # Blank values last either way; the job's own columns are never blank, and leaving
    # NULLS LAST off them lets the newest-first order walk the (project, created) index.
    nullable = query.sort not in ("name", "group", "user", "state", "created")
    order = OrderBy(expression, descending=query.descending, nulls_last=nullable or None)
    tie = "-id" if query.descending else "id"
    return runs.order_by(order, tie)


@dataclass(frozen=True)
class RunsPage:
    rows: list[Job]
    count: int
    capped: bool
    page: int
    pages: int


def runs_page(*, project: Project, query: RunsQuery) -> RunsPage:
    """One page of rows with their summaries and users, and the capped count: three queries.

    The page's ids are found first, sorting narrow rows (the id and the sort key), and
    only those rows are then read whole: a sort of wide joined rows costs several times
    more at tens of thousands of runs.
    """
    filtered = runs_filtered(project=project, filters=query.filters)
    count = filtered.values("id")[: COUNT_CAP + 1].count()
    start = (query.page - 1) * query.page_size
    ids = _page_ids(project, query, start)
    found = Job.objects.filter(pk__in=ids).select_related("summary", "user")
    by_id = found.defer("command", "setup", "metric_patterns", "note", "summary__metrics").in_bulk()
    rows = [by_id[i] for i in ids if i in by_id]
    pages = max((min(count, COUNT_CAP) + query.page_size - 1) // query.page_size, 1)
    if count > COUNT_CAP:  # the count stops at the cap; a full page may have more after it
        pages = max(pages, query.page + (len(rows) == query.page_size))
    return RunsPage(rows, min(count, COUNT_CAP), count > COUNT_CAP, query.page, pages)


def _page_ids(project: Project, query: RunsQuery, start: int) -> list[int]:
    """The ids of a page, in order.

    Sorted by a summary column, the runs with a value come from the summary's own
    (project, column) index, walked in order and stopped at the page's end (under a
    millisecond at 50,000 runs, where sorting a join costs hundreds); the runs without
    one follow, newest first, and cost a query or two more only on the pages that
    reach them.
    """
    size = query.page_size
    if query.sort not in SUMMARY_SORTS:
        runs = runs_queryset(project=project, query=query)
        return list(runs.values_list("id", flat=True)[start : start + size])
    filtered = runs_filtered(project=project, filters=query.filters)
    path = BASE_COLUMNS[query.sort][1]
    column = F(path).desc() if query.descending else F(path).asc()
    valued = filtered.filter(**{"summary__project_id": project.pk, f"{path}__isnull": False})
    tie = "-id" if query.descending else "id"
    ids = list(valued.order_by(column, tie).values_list("id", flat=True)[start : start + size])
    if len(ids) == size:
        return ids
    valued_count = start + len(ids) if ids or not start else valued.count()
    blank = filtered.filter(Q(summary__isnull=True) | Q(**{f"{path}__isnull": True}))
    skip = max(start - valued_count, 0)
    rest = blank.order_by("-created_at", "-id").values_list("id", flat=True)
    return ids + list(rest[skip : skip + size - len(ids)])


def cell(job: Job, column: str) -> Any:
    """The value a row shows in a column (None: blank)."""
    if column.startswith(PARAM_PREFIX):
        return (job.params or {}).get(column[len(PARAM_PREFIX) :])
    if column == "user":
        return job.user.get_username()
    if column == "created":
        return job.created_at
    if column in ("name", "state", "group"):
        return getattr(job, column)
    if column == "tags":
        return list(job.tags or [])
    summary = getattr(job, "summary", None)
    if summary is None:
        return None
    return getattr(summary, BASE_COLUMNS[column][1].removeprefix("summary__"))


def cell_unit(job: Job, column: str) -> str:
    """The unit of a row's value where it differs by run: throughput in tokens/s, samples/s
    or steps/s (whichever the run logged); "" for the other columns."""
    summary = getattr(job, "summary", None)
    if column != "throughput" or summary is None or not summary.throughput_unit:
        return ""
    return rate_unit(summary.throughput_unit)


def column_title(column: str) -> str:
    if column.startswith(PARAM_PREFIX):
        return column[len(PARAM_PREFIX) :]
    return BASE_COLUMNS[column][0]
