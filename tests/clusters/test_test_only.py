"""`sbatch --test-only` asked in one command: the command, and answers read from verbatim
sandbox output (fixtures/slurm/sbatch_test_only.txt, its README row)."""

import shlex
from datetime import UTC, datetime

import pytest

from clusters.slurm import SlurmTools, TestOnly, scheduling_options
from clusters.slurm.test_only import MARKER, asks_command, parse_answers
from portal_lib.cache import JSONSerializer
from tests.clusters.slurm_output import fixture

TOOLS = SlurmTools(conf="/etc/slurm/slurm.conf")


def test_four_asks_answered_in_order_from_captured_output() -> None:
    answers = parse_answers(fixture("sbatch_test_only.txt"), asks=4)
    start = datetime(2026, 12, 6, 15, 51, 18, tzinfo=UTC)
    assert answers[:2] == [
        TestOnly(start=start, nodes="n1", partition="gpu"),
        TestOnly(start=start, nodes="n1", partition="gpu"),
    ]
    assert answers[2] == TestOnly(
        start=None, error="allocation failure: Requested node configuration is not available"
    )
    assert answers[3].start is None
    assert answers[3].error.startswith("invalid partition specified: nope")


def test_an_answer_cut_short_is_an_error_not_a_start() -> None:
    text = fixture("sbatch_test_only.txt")
    first_two = text[: text.index(MARKER, text.index(MARKER) + 1)]  # the second marker lost
    answers = parse_answers(first_two, asks=3)
    assert answers[0].start is not None
    assert [a.start for a in answers[1:]] == [None, None]
    assert answers[2].error == "Slurm did not answer"


def test_one_command_under_sh_each_ask_wrapped_and_closed_by_a_marker() -> None:
    command = asks_command([["--nodes=1", "--gres=gpu:2"], ["--time=0-00:10:00"]], tools=TOOLS)
    shell, flag, script = shlex.split(command)
    assert (shell, flag) == ("/bin/sh", "-c")
    asks = script.split("; echo @@portal-test-only $?")
    assert len(asks) == 3 and asks[2] == ""
    assert asks[0].startswith("/usr/bin/env -i PATH=/usr/bin:/bin")
    assert "SLURM_CONF=/etc/slurm/slurm.conf /usr/bin/sbatch --test-only --nodes=1" in asks[0]
    assert asks[1].endswith("--time=0-00:10:00 --wrap=true 2>&1")


@pytest.mark.parametrize(
    "option",
    ["--output=/tmp/x", "--wrap=rm -rf ~", "--partition=gpu;id", "--account=$(id)", "-N2"],
)
def test_only_plain_scheduling_options_reach_the_shell(option: str) -> None:
    with pytest.raises(ValueError, match="not a scheduling option"):
        asks_command([["--nodes=1", option]], tools=TOOLS)


def test_scheduling_options_of_a_batch_script() -> None:
    script = (
        "#!/bin/bash\n#SBATCH --job-name=portal-1\n#SBATCH --nodes=2\n"
        "#SBATCH --output=/runs/x/stdout.log\n#SBATCH '--exclude=n[1-2]'\n"
        "#SBATCH --gres=gpu:2\necho '#SBATCH --nodes=9'\n"
    )
    assert scheduling_options(script) == ["--nodes=2", "--exclude=n[1-2]", "--gres=gpu:2"]


def test_answers_round_trip_through_the_production_caches_serializer() -> None:
    """The form's answers are cached in Redis, whose serializer builds back only the
    dataclasses settings.CACHE_JSON_TYPES names (tests use an in-memory cache)."""
    serializer = JSONSerializer()
    answers = parse_answers(fixture("sbatch_test_only.txt"), asks=4)
    assert serializer.loads(serializer.dumps(answers)) == answers  # type: ignore[arg-type]
