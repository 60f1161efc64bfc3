"""Single sign-on in Chromium: a directory person signs in through the OpenID provider.

Real servers, each started here and stopped after: slapd (the `directory` fixture), the
OpenID provider backed by it (oidc-provider on Node.js), and daphne with the portal's
OpenID Connect settings pointing at the provider. The person lands on the dashboard with
the project their LDAP group maps to, opens a job of it, logs out (through the
provider's own sign-out), and the job's page then sends them to the log-in page.
"""

import pytest
from django.contrib.auth.models import User

from devtools.ldap_server import PASSWORDS
from projects.models import Project
from tests import factories
from tests.fixtures.sso import SITE
from tests.helpers import screenshot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]


def test_an_ldap_person_signs_in_through_the_provider_and_out_again(
    page, sso_portal: str, owner: User, project: Project
) -> None:
    job, _ = factories.job(project, owner, factories.cluster(), name="resnet-sso")

    page.goto(f"{sso_portal}/")
    sign_in = page.get_by_role("link", name=f"Sign in with {SITE}")
    screenshot(page, "sso-login")
    sign_in.click()
    # The provider's own form: the directory's name and password.
    page.get_by_label("Directory user name").fill("alice")
    page.get_by_label("Directory password").fill(PASSWORDS["alice"])
    screenshot(page, "sso-provider-login")
    page.get_by_role("button", name="Sign in").click()

    page.get_by_role("heading", name="Hello, alice").wait_for()
    # ml-team -> vision: the dashboard lists it.
    assert page.get_by_role("cell", name="Vision models").is_visible()
    screenshot(page, "sso-dashboard")
    alice = User.objects.get(username="alice")
    assert alice.memberships.get().project == project

    page.goto(f"{sso_portal}/jobs/{job.pk}/")
    page.get_by_text("resnet-sso").first.wait_for()

    page.get_by_role("button", name="Log out").click()
    # The provider asks, then sends the browser back to the portal's log-in page.
    page.get_by_role("button", name="Yes, sign out").click()
    page.get_by_role("heading", name="Log in").wait_for()
    assert page.url.startswith(f"{sso_portal}/login/")

    page.goto(f"{sso_portal}/jobs/{job.pk}/")
    page.get_by_role("heading", name="Log in").wait_for()
    assert page.url == f"{sso_portal}/login/?next=/jobs/{job.pk}/"
    assert "resnet-sso" not in page.content()
