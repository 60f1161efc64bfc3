import subprocess

import pytest
from django.core.exceptions import ValidationError

from clusters.hostkeys import fingerprint, parse_host_key
from devtools.keys import new_key_pair


def test_fingerprint_matches_ssh_keygen(tmp_path) -> None:
    _, public = new_key_pair()
    (tmp_path / "k.pub").write_text(public + "\n")
    printed = subprocess.run(
        ["ssh-keygen", "-lf", str(tmp_path / "k.pub")], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    assert fingerprint(*parse_host_key(public)) == f"ssh-ed25519 {printed}"


def test_known_hosts_line_and_comment_are_accepted() -> None:
    _, public = new_key_pair()
    key_type, blob = parse_host_key(f"[127.0.0.1]:2222 {public} root@login")
    assert key_type == "ssh-ed25519"
    assert len(blob) == 51


@pytest.mark.parametrize(
    "line",
    ["", "not a key", "ssh-dss AAAAB3NzaC1kc3MAAACBAP", "ssh-ed25519 !!!notbase64"],
)
def test_bad_host_key_names_what_to_paste(line: str) -> None:
    with pytest.raises(ValidationError, match=r"ssh-keyscan|base64"):
        parse_host_key(line)
