"""Goodput per project, user and week: the selector, the project page, the admin report and
its CSV, the owners' weekly digest and the API; members and staff only."""

import csv
import io
import re
from datetime import date, datetime, time, timedelta
from importlib import import_module

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Permission, User
from django.core import mail
from django.test import Client
from django.utils import timezone

from monitoring.goodput.digest import goodput_digests_send
from monitoring.goodput.report import (
    cards_in_weeks,
    goodput_rows,
    iso_week,
    parse_iso_week,
    project_goodput,
    wasted_jobs,
    week_start,
)
from monitoring.models import EfficiencyCard, GoodputDigest
from projects.models import Project
from tests import factories

THIS_WEEK = week_start(timezone.localdate())
LAST_WEEK = THIS_WEEK - timedelta(weeks=1)


def at(monday: date, day: int, hour: int = 12) -> datetime:
    """A time in the week of `monday` (day 0 is the Monday)."""
    moment = datetime.combine(monday + timedelta(days=day), time(hour))
    return timezone.make_aware(moment, timezone.get_current_timezone())


@pytest.fixture
def weeks(project, owner, member, other_job):
    """Last week: the owner's hung job and idle job, the member's good job; this week: one more.

    Another project's job (other_job) has a card last week too, which vision must never count.
    """
    cluster = other_job.cluster
    hung, hung_1 = factories.job(project, owner, cluster, name="hangs-a-lot")
    factories.efficiency_card(
        hung_1, ended_at=at(LAST_WEEK, 0), startup=1.0, productive=5.0, hung=4.0, queued=2.0
    )
    hung_2 = hung.attempts.create(number=2)
    factories.efficiency_card(hung_2, ended_at=at(LAST_WEEK, 1), productive=6.0, lost=2.0)
    idle, idle_1 = factories.job(project, owner, cluster, name="sleepy")
    factories.efficiency_card(idle_1, ended_at=at(LAST_WEEK, 6, 23), productive=1.0, idle=3.0)
    _, good = factories.job(project, member, cluster, name="tidy")
    factories.efficiency_card(good, ended_at=at(LAST_WEEK, 3), productive=10.0, declared_pauses=1)
    _, now = factories.job(project, member, cluster, name="this-week")
    factories.efficiency_card(now, ended_at=at(THIS_WEEK, 0, 0), productive=2.0, idle=2.0)
    factories.efficiency_card(
        other_job.attempts.get(number=1), ended_at=at(LAST_WEEK, 2), productive=1.0, hung=99.0
    )
    return hung, idle


def test_iso_weeks_are_parsed_and_printed_as_input_type_week_sends_them() -> None:
    assert parse_iso_week("2026-W48") == date(2026, 11, 23)
    assert iso_week(date(2026, 11, 23)) == "2026-W48"
    assert iso_week(date(2021, 1, 4)) == "2021-W01"  # Jan 1-3 2021 are in 2020-W53
    for bad in ("2026-48", "W48", "2026-W54", "", "2026-Wxx"):
        with pytest.raises(ValueError):
            parse_iso_week(bad)


def test_rows_sum_each_part_per_project_and_week_in_one_query(
    weeks, django_assert_num_queries
) -> None:
    with django_assert_num_queries(1):
        rows = goodput_rows(cards_in_weeks(first=LAST_WEEK, last=THIS_WEEK), by=("project",))
    by_key = {(row.project, row.week): row for row in rows}
    assert set(by_key) == {("vision", LAST_WEEK), ("vision", THIS_WEEK), ("speech", LAST_WEEK)}
    last = by_key["vision", LAST_WEEK]
    assert last.attempts == 4
    assert last.gpu_hours == pytest.approx(10 + 8 + 4 + 11)
    assert last.parts == pytest.approx(
        {"startup": 1, "productive": 22, "declared_pauses": 1, "hung": 4, "idle": 3, "lost": 2}
    )
    assert last.goodput == pytest.approx(22 / 33)
    assert last.wasted_gpu_hours == pytest.approx(4 + 3 + 2)
    assert last.queued_gpu_hours == pytest.approx(2)
    assert by_key["vision", THIS_WEEK].goodput == pytest.approx(0.5)  # Monday 00:00 is this week
    # By user: the owner's three attempts, the member's one.
    users = goodput_rows(cards_in_weeks(first=LAST_WEEK, last=LAST_WEEK), by=("project", "user"))
    assert {(r.project, r.user): r.attempts for r in users} == {
        ("vision", "olivia"): 3,
        ("vision", "mia"): 1,
        ("speech", "samuel-stranger"): 1,
    }


def test_the_jobs_that_wasted_most_are_hung_idle_and_lost_summed_over_attempts(weeks) -> None:
    hung, idle = weeks
    project = hung.project
    found = wasted_jobs(project_id=project.pk, week=LAST_WEEK)
    assert [(j.job_id, j.wasted_gpu_hours) for j in found] == [(hung.pk, 6.0), (idle.pk, 3.0)]
    assert found[0].attempts == 2 and found[0].parts == {"hung": 4.0, "idle": 0.0, "lost": 2.0}
    assert wasted_jobs(project_id=project.pk, week=LAST_WEEK, limit=1)[0].job_id == hung.pk


def test_the_project_page_shows_weeks_and_users_to_members_only(
    client: Client, weeks, member, outsider, staff
) -> None:
    client.force_login(member)
    response = client.get("/projects/vision/")
    page = response.content.decode()
    table = page[page.index('id="goodput-weeks"') : page.index('id="goodput-users"')]
    row = re.search(rf'<tr data-week="{iso_week(LAST_WEEK)}">(.*?)</tr>', table, re.S)
    assert row is not None
    cells = dict(re.findall(r'data-part="(\w+)">([^<]*)<', row[1]))
    assert cells["charged"] == "33.000" and cells["productive"] == "22.000"
    assert cells["hung"] == "4.000" and cells["goodput"] == "66.7 %"
    assert "99.000" not in page  # the other project's hung hours
    users = response.context["goodput"].users
    assert {(r.week, r.user) for r in users} == {
        (LAST_WEEK, "olivia"),
        (LAST_WEEK, "mia"),
        (THIS_WEEK, "mia"),
    }
    assert response.context["goodput"].total.gpu_hours == pytest.approx(33 + 4)
    client.force_login(outsider)
    assert client.get("/projects/vision/").status_code == 404
    client.force_login(staff)
    assert "goodput-weeks" in client.get("/projects/vision/").content.decode()


def test_a_project_page_window_starts_eight_weeks_back(project) -> None:
    found = project_goodput(project_id=project.pk, last=date(2026, 12, 2))
    assert (found.first_week, found.last_week) == ("2026-W42", "2026-W49")
    assert found.weeks == [] and found.total.gpu_hours == 0 and found.total.goodput is None


def _page_rows(html: str) -> list[list[str]]:
    body = html[html.index('id="goodput-report"') :]
    body = body[: body.index("</tbody>")]
    rows = []
    for tr in re.findall(r"<tr data-week=.*?</tr>", body, re.S):
        week = re.search(r'data-week="([^"]+)"', tr)
        project = re.search(r'data-project="([^"]*)"', tr)
        user = re.search(r'data-user="([^"]*)"', tr)
        cells = re.findall(r'data-part="\w+">([^<]*)<', tr)
        goodput = cells[-2].removesuffix(" %")
        rows.append(
            [
                week[1] if week else "",
                project[1] if project else "",
                user[1] if user else "",
                *cells[:-2],
                "" if goodput == "\u2013" else goodput,
                cells[-1],
            ]
        )
    return rows


def _csv_rows(content: bytes) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(content.decode())))
    header = rows[0]
    assert header[:5] == ["week", "week_start", "project", "user", "attempts"]
    return [[r[0], r[2], r[3], *r[5:]] for r in rows[1:]]


@pytest.mark.parametrize("by", ["project", "user"])
def test_the_admin_report_and_its_csv_show_the_same_numbers(
    client: Client, weeks, staff, by: str
) -> None:
    client.force_login(staff)
    query = {"start": iso_week(LAST_WEEK), "end": iso_week(LAST_WEEK), "by": by}
    page = client.get("/admin/monitoring/efficiencycard/goodput/", query)
    assert page.status_code == 200
    shown = _page_rows(page.content.decode())
    download = client.get("/admin/monitoring/efficiencycard/goodput/", {**query, "format": "csv"})
    assert download["Content-Type"].startswith("text/csv")
    assert _csv_rows(download.content) == shown
    projects = {row[1] for row in shown}
    assert projects == {"speech", "vision"}  # across projects, only last week
    assert len(shown) == (2 if by == "project" else 3)
    vision = next(r for r in shown if r[1] == "vision" and r[2] in ("", "olivia"))
    assert vision[3] == ("33.000" if by == "project" else "22.000")  # charged GPU-h
    assert vision[5] == ("22.000" if by == "project" else "12.000")  # productive GPU-h


def test_the_admin_report_filters_by_project_and_says_what_is_wrong_with_a_range(
    client: Client, weeks, staff
) -> None:
    client.force_login(staff)
    vision = Project.objects.get(slug="vision")
    query = {"start": iso_week(LAST_WEEK), "project": str(vision.pk), "format": "csv"}
    rows = _csv_rows(client.get("/admin/monitoring/efficiencycard/goodput/", query).content)
    assert {(r[0], r[1]) for r in rows} == {
        (iso_week(THIS_WEEK), "vision"),
        (iso_week(LAST_WEEK), "vision"),
    }
    swapped = {"start": iso_week(THIS_WEEK), "end": iso_week(LAST_WEEK)}
    page = client.get("/admin/monitoring/efficiencycard/goodput/", swapped).content.decode()
    assert "The last week is before the first: swap them." in page
    bad = client.get("/admin/monitoring/efficiencycard/goodput/", {"start": "soon"})
    assert "is no ISO week: write it as 2026-W48." in bad.content.decode()


def test_the_admin_report_refuses_non_staff_and_staff_without_the_permission(
    client: Client, weeks, owner, django_user_model
) -> None:
    url = "/admin/monitoring/efficiencycard/goodput/?format=csv"
    assert client.get(url).status_code == 302  # to the admin login
    client.force_login(owner)  # a project owner is no admin
    response = client.get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    clerk = django_user_model.objects.create_user(username="clerk", is_staff=True)
    client.force_login(clerk)
    assert client.get(url).status_code == 403
    clerk.user_permissions.add(Permission.objects.get(codename="view_efficiencycard"))
    client.force_login(User.objects.get(pk=clerk.pk))
    assert client.get(url).status_code == 200


def test_owners_get_last_weeks_digest_once_naming_the_jobs_that_wasted_most(
    weeks, owner, member, settings
) -> None:
    settings.PORTAL_URL = "https://portal.example.org/"
    hung, _ = weeks
    assert goodput_digests_send() == 1
    (message,) = [m for m in mail.outbox if "vision" in m.subject]
    assert message.to == [owner.email]  # owners only, not the member
    assert f"week {iso_week(LAST_WEEK)}" in message.subject and "66.7 %" in message.subject
    body = str(message.body)
    assert "33.000 GPU-hours charged over 4 attempts, goodput 66.7 %" in body
    assert re.search(r"Hung +4\.000", body) and re.search(r"Productive +22\.000", body)
    assert f"https://portal.example.org/jobs/{hung.pk}/" in body
    assert body.index("hangs-a-lot") < body.index("sleepy")  # most wasted first
    assert "tidy" not in body  # wasted nothing
    assert "99.000" not in body  # another project's
    # The other project's owner has no address: its digest is recorded, nothing sent.
    assert len(mail.outbox) == 1
    assert GoodputDigest.objects.filter(week=LAST_WEEK).count() == 2
    assert goodput_digests_send() == 0  # a re-run the same week sends nothing new
    assert len(mail.outbox) == 1


def test_a_failed_mail_is_tried_again_at_the_next_run(weeks, owner, monkeypatch) -> None:
    def refused(*args: object, **kwargs: object) -> int:
        raise OSError("mail server down")

    monkeypatch.setattr("monitoring.goodput.digest.send_mail", refused)
    assert goodput_digests_send() == 0
    assert list(GoodputDigest.objects.values_list("project__slug", flat=True)) == ["speech"]
    monkeypatch.undo()
    assert goodput_digests_send() == 1
    assert [m.to for m in mail.outbox] == [[owner.email]]


def test_the_api_gives_the_pages_numbers_to_members_and_refuses_outsiders(
    client: Client, weeks, member, outsider
) -> None:
    client.force_login(member)
    query = {"start": iso_week(LAST_WEEK), "end": iso_week(THIS_WEEK)}
    data = client.get("/api/v1/projects/vision/goodput", query).json()
    assert (data["first_week"], data["last_week"]) == (iso_week(LAST_WEEK), iso_week(THIS_WEEK))
    last = next(w for w in data["weeks"] if w["week"] == iso_week(LAST_WEEK))
    assert last["week_start"] == LAST_WEEK.isoformat()
    assert last["gpu_hours"] == pytest.approx(33) and last["goodput"] == pytest.approx(22 / 33)
    assert last["parts"]["hung"] == pytest.approx(4)
    assert {(u["week"], u["user"]) for u in data["users"]} == {
        (iso_week(LAST_WEEK), "olivia"),
        (iso_week(LAST_WEEK), "mia"),
        (iso_week(THIS_WEEK), "mia"),
    }
    bad = client.get("/api/v1/projects/vision/goodput", {"start": "yesterday"})
    assert bad.status_code == 400 and "2026-W48" in bad.json()["start"][0]
    client.force_login(outsider)
    assert client.get("/api/v1/projects/vision/goodput").status_code == 404
    assert client.get("/api/v1/projects/speech/goodput").status_code == 404


def test_cards_stored_before_the_part_columns_get_them_from_their_json(project, owner) -> None:
    fill = import_module("monitoring.migrations.0009_efficiency_card_parts_and_goodput_digest")
    _, attempt = factories.job(project, owner, factories.cluster())
    end = at(LAST_WEEK, 2)
    parts = {"startup": 0.5, "productive": 3.0, "declared_pauses": 0.25, "hung": 1.0}
    card = EfficiencyCard.objects.create(  # as 0007's cards were: the JSON only
        attempt=attempt,
        data={
            "gpu_hours": 4.75,
            "queued_gpu_hours": 0.125,
            "parts": {**parts, "idle": 0.0, "lost": 0.0},
            "span": {"start": end.timestamp() - 3600, "end": end.timestamp()},
        },
    )
    fill.cards_fill(django_apps, None)
    card.refresh_from_db()
    assert card.ended_at == end
    assert (card.gpu_hours, card.queued_gpu_hours) == (4.75, 0.125)
    assert (card.productive_gpu_hours, card.hung_gpu_hours, card.lost_gpu_hours) == (3, 1, 0)
    assert card.declared_pauses_gpu_hours == 0.25
