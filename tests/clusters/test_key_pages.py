"""The cluster logins page and the self-service key page, without a cluster: who sees
what, the one line to paste, and a private key that never reaches a page."""

import base64
import html

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from clusters.certificates.installed import authorized_keys_line, installed_key_make
from clusters.models import Authentication, Cluster, ClusterAccount
from tests import factories


@pytest.fixture
def installed(cluster: Cluster, member: User) -> ClusterAccount:
    """mia's login on alps, by a key she installs (none made yet)."""
    return ClusterAccount.objects.create(
        cluster=cluster, user=member, username="mia", authentication=Authentication.INSTALLED_KEY
    )


def _key_page(cluster: Cluster) -> str:
    return reverse("login-key", args=[cluster.name])


def _secrets(private_key: str) -> list[str]:
    """The private key's text and each line of its base64 body, as a page could leak them."""
    body = [ln for ln in private_key.splitlines() if ln and not ln.startswith("-----")]
    return [private_key.strip(), *body, base64.b64encode(private_key.encode()).decode()[:40]]


def test_the_page_makes_a_key_and_shows_only_the_line_to_paste(
    client: Client, member: User, installed: ClusterAccount, cluster: Cluster
) -> None:
    client.force_login(member)
    empty = client.get(_key_page(cluster))
    assert empty.status_code == 200
    assert b"Make my key" in empty.content
    made = client.post(_key_page(cluster), {"action": "make"})
    assert made.status_code == 302
    installed.refresh_from_db()
    assert installed.private_key and installed.key_made_at
    page = client.get(_key_page(cluster)).content.decode()
    line = authorized_keys_line(account=installed)
    assert line.startswith('restrict,from="127.0.0.1,::1" ssh-ed25519 AAAA')
    assert line.endswith(" portal@alps:mia")
    assert html.escape(line) in page
    for secret in _secrets(installed.private_key):
        assert secret not in page
    assert "PRIVATE KEY" not in page
    # Making a key again replaces it: the old line stops working.
    client.post(_key_page(cluster), {"action": "make"})
    installed.refresh_from_db()
    assert authorized_keys_line(account=installed) != line


def test_the_line_names_the_portals_addresses_from_the_setting(
    installed: ClusterAccount, settings
) -> None:
    assert authorized_keys_line(account=installed) == ""  # no key made yet: nothing to paste
    settings.SSH_PORTAL_ADDRESSES = ["192.0.2.10", "2001:db8::7"]
    installed_key_make(account=installed)
    line = authorized_keys_line(account=installed)
    assert line.startswith('restrict,from="192.0.2.10,2001:db8::7" ssh-ed25519 ')
    assert len(line.splitlines()) == 1


def test_a_certificate_or_stored_login_makes_no_key(
    client: Client, member: User, cluster: Cluster
) -> None:
    account = ClusterAccount.objects.create(
        cluster=cluster, user=member, username="mia", authentication=Authentication.CERTIFICATE
    )
    client.force_login(member)
    page = client.get(_key_page(cluster))
    assert b"nothing to do" in page.content and b"make-key" not in page.content
    assert b'id="test-key"' in page.content  # a certificate login can be tested too
    # Without a CA the test says so, in words an administrator acts on.
    tested = client.post(_key_page(cluster), {"action": "test"}).content.decode()
    assert "The portal does not log in as mia now" in tested
    assert "ssh_ca create" in tested
    refused = client.post(_key_page(cluster), {"action": "make"})
    assert refused.status_code == 400
    assert b"does not use a key you install" in refused.content
    account.refresh_from_db()
    assert account.private_key == ""
    assert client.post(_key_page(cluster), {"action": "delete"}).status_code == 400


def test_an_outsider_and_the_shared_account_get_no_key_page(
    client: Client, outsider: User, installed: ClusterAccount, cluster: Cluster
) -> None:
    factories.account(cluster, None)  # the shared account is no one's own login
    client.force_login(outsider)
    assert client.get(_key_page(cluster)).status_code == 404
    assert client.post(_key_page(cluster), {"action": "make"}).status_code == 404
    installed.refresh_from_db()
    assert installed.private_key == ""
    client.logout()
    anonymous = client.get(_key_page(cluster))
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]


def test_the_logins_page_lists_the_users_own_logins_in_fixed_queries(
    client: Client, member: User, installed: ClusterAccount, django_assert_num_queries
) -> None:
    for name in ("bern", "cscs"):
        ClusterAccount.objects.create(
            cluster=factories.cluster(name), user=member, username="mia",
            authentication=Authentication.CERTIFICATE,
        )  # fmt: skip
    client.force_login(member)
    # The session, the user, then the accounts with their clusters in one query.
    with django_assert_num_queries(3):
        page = client.get(reverse("login-list"))
    rows = page.content.decode()
    assert rows.count('data-cluster="') == 3
    assert "nothing to do" in rows and "Set up the key" in rows
    assert reverse("login-list") in client.get(reverse("cluster-list")).content.decode()


def test_the_logins_page_of_someone_without_logins(client: Client, outsider: User) -> None:
    client.force_login(outsider)
    assert b"no login of your own" in client.get(reverse("login-list")).content
