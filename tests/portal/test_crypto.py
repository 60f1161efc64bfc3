import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from clusters.models import Cluster, ClusterAccount
from portal_lib import crypto

KEY_TEXT = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-material-1234\n-----END OPENSSH PRIVATE KEY-----\n"
)
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLEexampleEXAMPLEexampleEXAMPLEexample"


@pytest.fixture
def account(db: None) -> ClusterAccount:
    cluster = Cluster.objects.create(name="c1", ssh_host="login", host_key=HOST_KEY)
    return ClusterAccount.objects.create(cluster=cluster, username="svc", private_key=KEY_TEXT)


def test_private_key_round_trips(account: ClusterAccount) -> None:
    assert ClusterAccount.objects.get(pk=account.pk).private_key == KEY_TEXT


def test_private_key_is_not_stored_in_clear(account: ClusterAccount) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT private_key FROM clusters_clusteraccount WHERE id = %s", [account.pk]
        )
        (raw,) = cursor.fetchone()
    assert "secret-material" not in raw
    assert "PRIVATE KEY" not in raw
    assert crypto.decrypt(raw) == KEY_TEXT


def test_rotated_key_still_decrypts_old_rows(account: ClusterAccount, settings) -> None:
    settings.FIELD_ENCRYPTION_KEYS = [
        Fernet.generate_key().decode(),
        *settings.FIELD_ENCRYPTION_KEYS,
    ]
    assert ClusterAccount.objects.get(pk=account.pk).private_key == KEY_TEXT


def test_missing_key_names_the_setting(account: ClusterAccount, settings) -> None:
    settings.FIELD_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(ImproperlyConfigured, match="FIELD_ENCRYPTION_KEYS"):
        ClusterAccount.objects.get(pk=account.pk)
