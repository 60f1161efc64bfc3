"""A second rule that fires exactly when one of the owner's rules does is refused, by the
form and by the service, with a message naming the rule it repeats; the rules page shows
each rule's own settings only (no series for a "Job ended" rule)."""

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from monitoring.alerts.rules import rule_settings, rule_settings_text
from monitoring.alerts.services import DuplicateRule, alert_rule_add, alert_rule_twin
from monitoring.models import AlertKind, AlertRule
from projects.models import Project

pytestmark = pytest.mark.django_db


def _post(user: User, **fields: Any) -> Any:
    client = Client()
    client.force_login(user)
    return client.post(reverse("alert-rules"), {"to_portal": "on", **fields})


def _errors(page: Any) -> str:
    return page.context["form"].non_field_errors().as_text() if page.status_code == 200 else ""


def test_the_form_refuses_a_rule_the_owner_has_and_names_it(owner: User) -> None:
    bound = {"kind": AlertKind.LOSS_ABOVE, "series": "loss", "threshold": "2", "step": "100"}
    assert _post(owner, **bound).status_code == 302
    first = AlertRule.objects.get()
    # Told another way, it would still fire on the same thing: every alert twice.
    again = _post(owner, **bound, to_mail="", webhook_url="")
    message = _errors(again)
    assert f"You have this rule already: #{first.pk} " in message
    assert "Loss above a bound after a step, above 2 after step 100, series loss" in message
    assert "your jobs" in message and "delete that rule" in message
    assert AlertRule.objects.count() == 1
    # Another bound, another series or no step is another rule.
    assert _post(owner, **{**bound, "threshold": "3"}).status_code == 302
    assert _post(owner, **{**bound, "series": "eval_loss"}).status_code == 302
    assert _post(owner, **{**bound, "step": ""}).status_code == 302
    assert AlertRule.objects.count() == 4


def test_settings_the_kind_does_not_read_make_no_second_rule(owner: User) -> None:
    assert _post(owner, kind=AlertKind.ENDED, series="loss", threshold="5").status_code == 302
    rule = AlertRule.objects.get()
    assert rule.threshold is None  # a hidden field's value is not kept
    message = _errors(_post(owner, kind=AlertKind.ENDED, series="tokens_per_sec"))
    assert f"#{rule.pk} (Job ended; your jobs)" in message
    # The time limit's default minutes are its 10 written out.
    assert _post(owner, kind=AlertKind.TIME_LIMIT).status_code == 302
    message = _errors(_post(owner, kind=AlertKind.TIME_LIMIT, threshold="10"))
    assert "Time limit close, 10 min left" in message
    assert _post(owner, kind=AlertKind.TIME_LIMIT, threshold="30").status_code == 302


def test_a_project_rule_and_ones_own_are_two_rules(owner: User, project: Project) -> None:
    assert _post(owner, kind=AlertKind.STARTED).status_code == 302
    assert _post(owner, kind=AlertKind.STARTED, project=project.pk).status_code == 302
    message = _errors(_post(owner, kind=AlertKind.STARTED, project=project.pk))
    assert f"all jobs of {project.slug}" in message


def test_the_service_refuses_a_twin_for_the_api(owner: User, member: User) -> None:
    def rule(**fields: Any) -> AlertRule:
        return AlertRule(kind=AlertKind.THROUGHPUT_DROP, series="tokens_per_sec", **fields)

    first = alert_rule_add(rule=rule(), owner=owner)
    with pytest.raises(DuplicateRule) as refused:
        alert_rule_add(rule=rule(factor=2.0, to_mail=True), owner=owner)  # 2: the default
    assert refused.value.status == 409 and refused.value.code == "duplicate_rule"
    assert f"#{first.pk} (Throughput drops by a factor, below its recent median / 2" in str(
        refused.value
    )
    assert AlertRule.objects.count() == 1
    # Another owner's rule is theirs: no twin of it.
    assert alert_rule_add(rule=rule(), owner=member).owner == member
    assert alert_rule_twin(owner=owner, rule=rule(factor=3.0)) is None


def test_each_kind_reads_only_its_own_settings() -> None:
    ended = AlertRule(kind=AlertKind.ENDED, series="loss", threshold=3.0)
    assert rule_settings(ended) == {} and rule_settings_text(ended) == ""
    above = AlertRule(kind=AlertKind.LOSS_ABOVE, series=" loss ", threshold=0.0)
    assert rule_settings(above) == {"series": "loss", "threshold": 0.0, "step": 0.0}
    assert rule_settings_text(above) == "above 0"


def test_the_rules_page_shows_a_series_only_where_it_applies(owner: User) -> None:
    client = Client()
    client.force_login(owner)
    AlertRule.objects.create(owner=owner, kind=AlertKind.ENDED, series="loss")
    page = client.get(reverse("alert-rules")).content.decode()
    assert '<th scope="col">Series</th>' not in page and "<code>loss</code>" not in page
    AlertRule.objects.create(owner=owner, kind=AlertKind.LOSS_NONFINITE, series="loss")
    page = client.get(reverse("alert-rules")).content.decode()
    assert '<th scope="col">Series</th>' in page
    rows = re.findall(r'<tr id="rule-\d+" data-kind="(\w+)">(.*?)</tr>', page, re.S)
    by_kind = dict(rows)
    assert "<code>loss</code>" in by_kind[AlertKind.LOSS_NONFINITE]
    assert "<code>loss</code>" not in by_kind[AlertKind.ENDED]


def test_the_rules_page_queries_do_not_grow(
    owner: User, project: Project, django_assert_num_queries: Any
) -> None:
    client = Client()
    client.force_login(owner)
    for minutes in (5, 10, 15):
        AlertRule.objects.create(
            owner=owner, kind=AlertKind.TIME_LIMIT, threshold=minutes, project=project
        )
    # The session, the user, the owner's projects for the form's choice, the rules with
    # their projects.
    with django_assert_num_queries(4):
        assert client.get(reverse("alert-rules")).status_code == 200
