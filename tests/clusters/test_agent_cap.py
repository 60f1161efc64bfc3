"""What the gateway reads of an agent call: the reply the request can bring, and a banner."""

from pathlib import Path

import pytest

from clusters.agent import AgentCommand, AgentRequest, FileRead, ListingRead, run_agent
from clusters.agent.client import BANNER_BYTES, MAX_LISTINGS_BYTES
from clusters.ssh import OutputCapExceeded
from tests.clusters.agent_env import PYTHON
from tests.clusters.test_agent_client import LocalShell

MIB = 1024 * 1024


def test_the_cap_is_the_largest_reply_the_request_can_bring_and_a_banner() -> None:
    assert AgentRequest().reply_limit == BANNER_BYTES
    one_file = AgentRequest(files=[FileRead("log", "/x/stdout.log")])
    assert one_file.reply_limit == BANNER_BYTES + -(-MIB // 3) * 4 + 512  # 1 MiB in base64
    # All files together share max_bytes: a hundred of them bring no more than it.
    many = AgentRequest(files=[FileRead(f"f{i}", f"/x/{i}") for i in range(100)])
    assert many.reply_limit == BANNER_BYTES + -(-16 * MIB // 3) * 4 + 512 * 100
    squeue = AgentRequest(commands=[AgentCommand("squeue", ["squeue"])])
    assert squeue.reply_limit == BANNER_BYTES + 2 * 6 * 4 * MIB  # two streams, each escaped
    listings = AgentRequest(listings=[ListingRead(f"d{i}", f"/x/{i}") for i in range(1000)])
    assert listings.reply_limit == BANNER_BYTES + MAX_LISTINGS_BYTES  # however many


def test_a_login_that_prints_past_the_cap_fails_the_call(tmp_path: Path) -> None:
    chatty = LocalShell(tmp_path, banner="head -c 2000000 /dev/zero; echo; ")
    with pytest.raises(OutputCapExceeded):
        run_agent(chatty, AgentRequest(), python=PYTHON)
    (tmp_path / "stdout.log").write_bytes(b"x" * 1000)
    # The same banner fits beside a request that may bring more.
    reply = run_agent(
        chatty, AgentRequest(files=[FileRead("log", str(tmp_path / "stdout.log"))]), python=PYTHON
    )
    assert reply.files["log"].data == b"x" * 1000
