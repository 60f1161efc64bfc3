import pytest

from clusters.models import Cluster, ClusterAccount
from devtools.keys import new_key_pair
from tests.helpers import PASSWORD, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _log_in(page, live_server, username: str) -> None:
    page.goto(live_server.url + "/")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def test_member_logs_in_and_sees_the_dashboard(page, live_server, member) -> None:
    page.goto(live_server.url + "/")
    assert page.get_by_role("heading", name="Log in").is_visible()
    screenshot(page, "login")
    _log_in(page, live_server, "mia")
    page.get_by_role("heading", name="Hello, mia").wait_for()
    assert page.get_by_role("cell", name="Vision models").is_visible()
    screenshot(page, "dashboard")


def test_wrong_password_shows_the_error(page, live_server, member) -> None:
    page.goto(live_server.url + "/")
    page.get_by_label("User name").fill("mia")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    assert page.get_by_role("alert").inner_text().startswith("Your user name and password")


def test_admin_edits_a_quota_and_never_sees_a_key(page, live_server, staff, project) -> None:
    private, host_key = new_key_pair()
    cluster = Cluster.objects.create(
        name="alps", ssh_host="login.alps.example", host_key=host_key, gpu_model="H200"
    )
    account = ClusterAccount.objects.create(cluster=cluster, username="svc", private_key=private)
    _log_in(page, live_server, "root-admin")
    page.goto(f"{live_server.url}/admin/projects/project/")
    assert page.get_by_role("link", name="vision").is_visible()
    screenshot(page, "admin-projects")

    page.goto(f"{live_server.url}/admin/projects/quota/{project.quota.pk}/change/")
    page.get_by_label("GPU-hour budget per period").fill("321")
    page.get_by_role("button", name="Save", exact=True).click()
    page.get_by_text("was changed successfully").wait_for()
    project.quota.refresh_from_db()
    assert str(project.quota.gpu_hours_per_period) == "321.00"

    page.goto(f"{live_server.url}/admin/clusters/clusteraccount/{account.pk}/change/")
    assert page.get_by_text("stored (encrypted)").is_visible()
    assert page.get_by_label("Private key").input_value() == ""
    assert private.splitlines()[1] not in page.content()
    screenshot(page, "admin-cluster-account")
