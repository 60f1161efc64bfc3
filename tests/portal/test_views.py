from django.test import Client
from django.urls import reverse

from tests.helpers import PASSWORD


def test_front_page_sends_visitors_to_the_login_form(client: Client, db: None) -> None:
    response = client.get("/", follow=True)
    assert response.redirect_chain[-1][0].startswith(reverse("login"))
    assert b'name="password"' in response.content


def test_login_then_dashboard_lists_my_projects(client: Client, member) -> None:
    response = client.post(reverse("login"), {"username": "mia", "password": PASSWORD}, follow=True)
    assert response.status_code == 200
    assert b"Vision models" in response.content


def test_wrong_password_is_refused_with_a_message(client: Client, member) -> None:
    response = client.post(reverse("login"), {"username": "mia", "password": "nope"})
    assert response.status_code == 200
    assert b"didn't match" in response.content
    assert "_auth_user_id" not in client.session


def test_outsider_sees_no_one_elses_project(client: Client, outsider, project) -> None:
    client.force_login(outsider)
    response = client.get("/")
    assert response.status_code == 200
    assert b"Vision models" not in response.content
    assert b"not a member of any project" in response.content


def test_dashboard_query_count_is_fixed(client: Client, member, django_assert_num_queries) -> None:
    client.force_login(member)
    # session, user, projects with their quota (one join), usage (quotas, charges,
    # reservations), live jobs, finished jobs (with project and cluster), clusters
    with django_assert_num_queries(9):
        client.get("/")


def test_healthz(client: Client, db: None) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


def test_api_docs_refuse_anonymous(client: Client, db: None) -> None:
    # 401 with a Bearer challenge: the schema also serves token-holding clients.
    assert client.get(reverse("api-schema")).status_code == 401


def test_an_unmatched_api_path_answers_json_and_a_page_path_html(client: Client, member) -> None:
    """A series name with a newline matches no route (`<path:name>` stops at it): the API
    answers a JSON 404 as its schema promises, a page path Django's HTML one."""
    client.force_login(member)
    response = client.get("/api/v1/jobs/1/attempts/1/series/loss%0Ax")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
