"""The job page and the compare page in headless Chromium, each beside a naive version of
itself measured in the same run.

The job page: time to a usable page and to the first drawn chart, with the partial Plotly
bundle the page ships (static/vendor/plotly-basic) beside the same page given the full
bundle (vendor/plotly.min.js).

The compare page: COMPARE_RUNS runs x COMPARE_POINTS loss points, time to usable, as it
ships (each curve downsampled by the server to 1,000 x slices, a min and a max each)
beside the same page given every point of every run (Playwright answers its curves
request with them, read from the chunks like the server's read of a raw series), and,
with `--before=REV`, beside the page of revision REV of this repository (a second daphne
started in a git worktree of REV on the same database, its loads interleaved with ours).
"Usable" there: the form's controls are in the page (they come with the HTML, before any
script; "controls" is the first contentful paint) and every run's curve is drawn (the
chart's SVG holds COMPARE_RUNS traces).

The same page both ways: Playwright answers the page's request for the partial bundle
with the server's full one, so only the bundle differs. Each load is a fresh browser
context (a first visit: nothing cached), logged in with the same session cookie.
"Usable": the log console shows the job's log (the page's scripts have run, the
header and actions were there before). "First chart": the loss chart's SVG exists.

Uses its own database `portal_bench_page` on the local PostgreSQL, Redis database 15,
a real daphne and Debian's Chromium (/usr/bin/chromium). Needs no cluster.
Run: `.venv/bin/python bench/page.py [--quick] [--compare-only] [--before=REV]`.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench_page")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

from benchdb import QUICK, delete_jobs_without_charges, ensure_database  # noqa: E402

from devtools.servers import Daphne, running, server_env  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
]
REPEATS = 1 if QUICK else 12
STEPS = 200 if QUICK else 5_000
SERIES = ("loss", "tokens_per_sec", "samples", "it_per_s", "lr")
LOG_LINES = 200 if QUICK else 5_000
COMPARE_RUNS = 3 if QUICK else 20
COMPARE_POINTS = 2_000 if QUICK else 100_000
COMPARE_REPEATS = 1 if QUICK else 10
COMPARE_ONLY = "--compare-only" in sys.argv[1:]
BEFORE = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--before=")), "")
# Every point of 20 x 100,000 does not draw in minutes: one try, given this long.
EVERY_POINT_TIMEOUT_MS = 60_000
PARTIAL = "/static/vendor/plotly-basic/plotly-basic.min.js"
FULL = "/static/vendor/plotly.min.js"
USER, PASSWORD = "bench-page", "bench-page-password"
TIMEOUT_MS = 60_000


def _seed() -> int:
    """One running job with a log and SERIES x STEPS points; returns its id."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from clusters.models import Cluster
    from devtools.keys import new_key_pair
    from jobs.enums import State
    from jobs.models import Attempt, Job
    from monitoring.logs.store import Delivery, log_files, log_store
    from monitoring.series.write import series_append
    from projects.models import Membership, Project

    user, _ = User.objects.get_or_create(username=USER)
    user.set_password(PASSWORD)
    user.save()
    project, _ = Project.objects.get_or_create(slug="bench-page", defaults={"name": "Bench"})
    Membership.objects.get_or_create(user=user, project=project)
    cluster = Cluster.objects.filter(name="bench-page").first() or Cluster.objects.create(
        name="bench-page", ssh_host="127.0.0.1", ssh_port=1, host_key=new_key_pair()[1]
    )
    delete_jobs_without_charges(project=project)
    job = Job.objects.create(
        project=project, user=user, cluster=cluster, name="bench", command="python train.py",
        state=State.RUNNING, total_steps=STEPS * 2,
    )  # fmt: skip
    attempt = Attempt.objects.create(
        job=job, number=1, state=State.RUNNING, slurm_job_id="1", node_list="n1",
        started_at=timezone.now(), run_dir="~/portal-runs/bench",
    )  # fmt: skip
    for name in SERIES:
        series_append(
            points=[(attempt.pk, name, float(s), 1.0 + 1.0 / s) for s in range(1, STEPS + 1)]
        )
    log = "".join(f"step {s}, loss={1 + 1 / s:.4f}\n" for s in range(1, LOG_LINES + 1)).encode()
    files = log_files(attempt_ids=[attempt.pk], names=["stdout.log"])
    log_store(files=files, deliveries=[Delivery(attempt.pk, "stdout.log", 0, log)])
    return job.pk


def _seed_compare(user: Any, cluster: Any) -> list[int]:
    """COMPARE_RUNS finished runs of COMPARE_POINTS loss points in a project of their own,
    kept between bench runs (filling them takes a while); returns their ids."""
    import numpy as np

    from jobs.enums import State
    from jobs.models import Attempt, Job
    from monitoring.series.write import series_append
    from projects.models import Membership, Project

    slug = f"bench-compare-page-{COMPARE_POINTS}"
    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": "Bench compare"})
    Membership.objects.get_or_create(user=user, project=project)
    jobs = list(Job.objects.filter(project=project).order_by("id").values_list("id", flat=True))
    if len(jobs) >= COMPARE_RUNS:
        return jobs[:COMPARE_RUNS]
    steps = np.arange(COMPARE_POINTS, dtype=np.float64)
    for run in range(len(jobs), COMPARE_RUNS):
        job = Job.objects.create(
            project=project, user=user, cluster=cluster, name=f"seed-{run}",
            command="python train.py", state=State.COMPLETED, params={"seed": run},
        )  # fmt: skip
        attempt = Attempt.objects.create(job=job, number=1, state=State.COMPLETED)
        loss = 3.0 / np.sqrt(steps + 1) + np.random.default_rng(run).normal(0, 0.02, len(steps))
        points = [
            (attempt.pk, "loss", x, y) for x, y in zip(steps.tolist(), loss.tolist(), strict=True)
        ]
        for at in range(0, len(points), 50_000):
            series_append(points=points[at : at + 50_000])
        jobs.append(job.pk)
    return jobs


def _every_point(job_ids: list[int]) -> bytes:
    """The curves endpoint's answer with every point of every run (read whole, chunks and
    the newest blocks alike): what a chart without downsampling gets."""
    import json

    from jobs.models import Attempt
    from monitoring.series.read import series_read

    runs = []
    for attempt in Attempt.objects.filter(job_id__in=job_ids).select_related("job"):
        read = series_read(attempt_id=attempt.pk, name="loss", max_points=10**9)
        x, y = read.with_gaps()
        run = {"id": attempt.job_id, "name": attempt.job.name, "x": x, "y": y}
        runs.append({**run, "nonfinite": read.nonfinite, "total": read.total})
    body = {
        "metric": "loss",
        "unit": "",
        "y_title": "loss",
        "axis": "step",
        "runs": runs,
        "y_range": None,
        "left_out": [],
    }
    return json.dumps(body).encode()


def _load_compare(
    browser: Any, url: str, cookies: list[Any], every: Path | None
) -> tuple[float, float, int]:
    """(ms from navigation to every run's curve drawn, inf past EVERY_POINT_TIMEOUT_MS;
    ms to the first contentful paint; bytes of curves) of one first visit; `every`: the
    curves request answered with this file (every point), not by the server."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.add_cookies(cookies)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS if every is None else EVERY_POINT_TIMEOUT_MS)
    if every is not None:
        page.route(
            "**/compare/curves?**",
            lambda route: route.fulfill(path=every, content_type="application/json"),
        )
    try:
        page.goto(url, wait_until="commit")
        try:
            page.wait_for_function(
                "document.querySelectorAll('#compare-chart .scatterlayer .trace').length"
                f" >= {COMPARE_RUNS}"
            )
        except PlaywrightTimeout:
            return float("inf"), float("inf"), every.stat().st_size if every else 0
        drawn = float(page.evaluate("performance.now()"))
        painted = page.evaluate(
            """() => performance.getEntriesByName('first-contentful-paint')
            .map((e) => e.startTime)[0] ?? Infinity"""
        )
        size = page.evaluate(
            """() => performance.getEntriesByType('resource')
            .filter((e) => e.name.includes('/compare/curves'))
            .reduce((n, e) => n + e.decodedBodySize, 0)"""
        )
        return drawn, float(painted), int(size) or (every.stat().st_size if every else 0)
    finally:
        context.close()


def _load(browser: Any, url: str, cookies: list[Any], *, full: bool) -> tuple[float, float, int]:
    """(ms to usable, ms to first chart, bundle bytes) of one first visit."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.add_cookies(cookies)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    if full:
        base = url.split("/jobs/")[0]
        page.route(f"**{PARTIAL}", lambda route: route.continue_(url=base + FULL))
    try:
        page.goto(url, wait_until="commit")
        page.wait_for_function("document.getElementById('log')?.textContent.length > 0")
        usable = page.evaluate("performance.now()")
        page.wait_for_selector("#chart-loss .main-svg", state="attached")
        chart = page.evaluate("performance.now()")
        size = page.evaluate(
            """() => performance.getEntriesByType('resource')
            .filter((e) => e.name.includes('plotly')).reduce((n, e) => n + e.encodedBodySize, 0)"""
        )
    finally:
        context.close()
    return usable, chart, int(size)


def _stats(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[
        min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))
    ]


@contextmanager
def _worktree(revision: str) -> Iterator[Path]:
    """A checkout of `revision` of this repository in a temporary folder, removed after."""
    path = Path(tempfile.mkdtemp(prefix="bench-page-before-")) / "tree"
    git = ["git", "-C", str(ROOT), "worktree"]
    subprocess.run([*git, "add", "--detach", str(path), revision], check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run([*git, "remove", "--force", str(path)], check=True, capture_output=True)


def _log_in(browser: Any, base: str, job_id: int) -> list[Any]:
    login = browser.new_page()
    login.goto(f"{base}/login/?next=/jobs/{job_id}/")
    login.fill("#id_username", USER)
    login.fill("#id_password", PASSWORD)
    login.click("button[type=submit]")
    login.wait_for_url(f"**/jobs/{job_id}/")
    cookies: list[Any] = login.context.cookies()
    login.context.close()
    return cookies


def _job_page(browser: Any, url: str, cookies: list[Any]) -> dict[str, dict[str, list[float]]]:
    rows: dict[str, dict[str, list[float]]] = {}
    for full in (False, True):  # one warm-up each: daphne and the finders' first reads
        _load(browser, url, cookies, full=full)
    for _ in range(REPEATS):  # interleaved, so that a busy moment costs both alike
        for label, full in (("partial (ours)", False), ("full bundle", True)):
            usable, chart, size = _load(browser, url, cookies, full=full)
            row = rows.setdefault(label, {"usable": [], "chart": [], "bytes": []})
            row["usable"].append(usable)
            row["chart"].append(chart)
            row["bytes"].append(size)
    return rows


def _compare_page(
    browser: Any, urls: dict[str, str], cookies: list[Any], every: Path
) -> dict[str, tuple[list[float], list[float], int]]:
    """label: (ms to all curves drawn, ms to first paint, curves' bytes) of each visit;
    `urls`: the page's URL as it ships and, beside it, the one of `--before`'s server."""
    out: dict[str, tuple[list[float], list[float], int]] = {}
    for url in urls.values():
        _load_compare(browser, url, cookies, None)  # warm-up
    for _ in range(COMPARE_REPEATS):  # interleaved, as on the job page
        for label, url in urls.items():
            drawn, painted, size = _load_compare(browser, url, cookies, None)
            times, paints, _ = out.setdefault(label, ([], [], 0))
            times.append(drawn)
            paints.append(painted)
            out[label] = (times, paints, size)
    drawn, painted, size = _load_compare(browser, urls["downsampled (ours)"], cookies, every)
    out["every point"] = ([drawn], [painted], size)
    return out


def _print_job_page(rows: dict[str, dict[str, list[float]]]) -> None:
    print(
        f"job page, {len(SERIES)} series x {STEPS:,} steps, {LOG_LINES:,} log lines; "
        f"{REPEATS} first visits each, 1440x900 headless Chromium"
    )
    header = ("bundle", "Plotly bytes", "usable median", "usable p95", "chart median", "chart p95")
    print(" | ".join(f"{h:>14}" for h in header))
    print("-" * 97)
    for label, row in rows.items():
        usable_med, usable_p95 = _stats(row["usable"])
        chart_med, chart_p95 = _stats(row["chart"])
        cells = (
            label, f"{int(row['bytes'][0]):,}", f"{usable_med:.0f} ms", f"{usable_p95:.0f} ms",
            f"{chart_med:.0f} ms", f"{chart_p95:.0f} ms",
        )  # fmt: skip
        print(" | ".join(f"{cell:>14}" for cell in cells), flush=True)


def _print_compare(found: dict[str, tuple[list[float], list[float], int]]) -> None:
    print(
        f"\ncompare page, {COMPARE_RUNS} runs x {COMPARE_POINTS:,} loss points; "
        f"{COMPARE_REPEATS} first visits downsampled, 1 with every point; 1440x900 headless"
        " Chromium; usable: controls in the page and every curve drawn"
    )
    titles = ("curves", "JSON bytes", "controls median", "usable median", "usable p95")
    print(" | ".join(f"{h:>20}" for h in titles))
    print("-" * 114)
    late = f"> {EVERY_POINT_TIMEOUT_MS // 1000} s"  # not drawn in that time
    for label, (times, paints, size) in found.items():
        median, p95 = _stats(times)
        shown = (
            label,
            f"{size:,}",
            f"{_stats(paints)[0]:.0f} ms" if paints[0] != float("inf") else late,
            f"{median:.0f} ms" if median != float("inf") else late,
            f"{p95:.0f} ms" if p95 != float("inf") else late,
        )
        print(" | ".join(f"{cell:>20}" for cell in shown), flush=True)


def main() -> None:
    ensure_database()
    if not CHROMIUM.exists():
        sys.exit("bench/page.py needs Debian's chromium (/usr/bin/chromium)")
    import django

    django.setup()
    from django.core.management import call_command
    from playwright.sync_api import sync_playwright

    call_command("migrate", verbosity=0)
    job_id = _seed()
    from jobs.models import Job

    seeded = Job.objects.select_related("user", "cluster").get(pk=job_id)
    compare_ids = _seed_compare(seeded.user, seeded.cluster)
    compare_path = f"/projects/bench-compare-page-{COMPARE_POINTS}/compare/?runs=" + ",".join(
        map(str, compare_ids)
    )
    env = server_env(
        database_url=os.environ["DATABASE_URL"],
        redis_url=os.environ["REDIS_URL"],
        tag=os.environ.get("PORTAL_TEST_RUN", "bench"),
    )
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's loop in this thread
    rows: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as workdir, ExitStack() as stack:
        servers = [Daphne(env, Path(workdir))]
        if BEFORE:
            before = Daphne(env, Path(workdir), name="daphne-before")
            before.cwd = stack.enter_context(_worktree(BEFORE))  # its own code and static
            servers.append(before)
        stack.enter_context(running(*servers))
        every = Path(workdir) / "every-point.json"
        every.write_bytes(_every_point(compare_ids))
        urls = {"downsampled (ours)": servers[0].url + compare_path}
        if BEFORE:
            urls[f"before ({BEFORE})"] = servers[1].url + compare_path
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            # One login for both servers: the session lives in the database, the cookie
            # belongs to the host (127.0.0.1), whatever the port.
            cookies = _log_in(browser, servers[0].url, job_id)
            if not COMPARE_ONLY:
                rows = _job_page(browser, f"{servers[0].url}/jobs/{job_id}/", cookies)
            found = _compare_page(browser, urls, cookies, every)
            browser.close()
    if rows:
        _print_job_page(rows)
    _print_compare(found)


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")
