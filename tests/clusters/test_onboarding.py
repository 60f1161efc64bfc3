"""Onboarding without the sandbox: host key confirmation, the test jobs' targets and script,
the verdicts read from what the jobs wrote, the command's refusals, and who gets the button."""

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from clusters.hostkeys import fingerprint, parse_host_key
from clusters.inventory import PartitionLimits
from clusters.models import Cluster, ReadinessReport
from clusters.onboarding.checks import Check, summary
from clusters.onboarding.hostscan import HostKeyError, host_key_confirm, host_key_scan
from clusters.onboarding.probe import (
    MAX_PROBE_NODES,
    NodeProbe,
    ProbeOutcome,
    probe_script,
    probe_targets,
)
from clusters.onboarding.sampler import sampler_format
from clusters.onboarding.services import (
    NewCluster,
    OnboardingError,
    cluster_add,
    cluster_name_for,
    readiness_check_abandon,
    readiness_check_request,
)
from clusters.onboarding.verdicts import python_check, run_dir_check, sampler_check
from clusters.slurm import Node
from devtools.keys import new_key_pair
from devtools.servers import free_port
from jobs.rundir import GPU_QUERY_FIELDS
from portal_lib.queueing import task_named

# What the sandbox's stand-in and a real H200 print for the sampler's query, one GPU.
GPU_LINE = "2026/12/06 12:00:00.123, 0, GPU-5f1c2b7e-8d3a-4c1e-9f6b-0a1b2c3d4e5f, 87, 40321, 143771, 51, 412.35"


def _node(name: str, partitions: tuple[str, ...], gpus: int = 2, state: str = "IDLE") -> Node:
    return Node(
        name=name, state=state, cpus=8, memory_mb=8000, gpus=gpus, gpus_used=0,
        partitions=partitions, reason="",
    )  # fmt: skip


def _limits(*names: str) -> dict[str, PartitionLimits]:
    return {
        name: PartitionLimits(name, i == 0, 2, 2, 8, 8000, None) for i, name in enumerate(names)
    }


def test_the_fingerprint_the_site_gave_is_accepted_in_either_spelling() -> None:
    _, host_key = new_key_pair()
    shown = fingerprint(*parse_host_key(host_key))  # "ssh-ed25519 SHA256:..."
    host_key_confirm(host_key, shown)
    host_key_confirm(host_key, shown.split()[1])


def test_another_fingerprint_is_refused_naming_both() -> None:
    _, host_key = new_key_pair()
    _, other = new_key_pair()
    expected = fingerprint(*parse_host_key(other)).split()[1]
    with pytest.raises(HostKeyError) as refused:
        host_key_confirm(host_key, expected)
    assert expected in refused.value.message
    assert fingerprint(*parse_host_key(host_key)) in refused.value.message
    assert "Nothing was recorded" in refused.value.message


def test_a_fingerprint_in_another_form_is_refused_with_the_form_wanted() -> None:
    _, host_key = new_key_pair()
    with pytest.raises(HostKeyError, match="not a SHA256 fingerprint"):
        host_key_confirm(host_key, "MD5:12:34:56")


def test_no_host_key_from_a_closed_port_says_what_to_check() -> None:
    port = free_port()
    with pytest.raises(HostKeyError) as refused:
        host_key_scan("127.0.0.1", port)
    assert f"port {port}" in refused.value.message and "sshd runs there" in refused.value.message


def test_each_available_node_is_tried_once_in_its_first_partition() -> None:
    nodes = [
        _node("n1", ("gpu", "debug")),
        _node("n2", ("gpu",)),
        _node("n3", ("gpu",), state="DOWN+DRAIN"),
        _node("c1", ("debug",), gpus=0),
    ]
    targets, skipped = probe_targets(_limits("gpu", "debug"), nodes)
    assert [(t.node, t.partition, t.gpus) for t in targets] == [
        ("n1", "gpu", 2),
        ("n2", "gpu", 2),
        ("c1", "debug", 0),
    ]
    assert skipped == ["n3 (DOWN+DRAIN)"]


def test_past_the_cap_nodes_are_named_as_not_tried() -> None:
    nodes = [_node(f"n{i}", ("gpu",)) for i in range(MAX_PROBE_NODES + 2)]
    targets, skipped = probe_targets(_limits("gpu"), nodes)
    assert len(targets) == MAX_PROBE_NODES
    assert len(skipped) == 2 and "past the first" in skipped[0]


def test_the_test_job_is_short_pinned_and_asks_a_gpu_only_where_there_are_some() -> None:
    gpu = probe_script(
        NodeProbe("n1", "gpu", 2), probe_dir="/shared/runs/.readiness-x", name="portal-readiness-x",
        gpu_fields=GPU_QUERY_FIELDS,
    )  # fmt: skip
    assert "#SBATCH --nodelist=n1" in gpu and "#SBATCH --partition=gpu" in gpu
    assert "#SBATCH --time=2" in gpu and "#SBATCH --gres=gpu:1" in gpu
    assert f"--query-gpu={','.join(GPU_QUERY_FIELDS)} --format=csv,noheader,nounits" in gpu
    cpu = probe_script(
        NodeProbe("c1", "debug", 0), probe_dir="/shared/runs/.readiness-x", name="x",
        gpu_fields=GPU_QUERY_FIELDS,
    )  # fmt: skip
    assert "--gres" not in cpu and "nvidia-smi" not in cpu and "python3" in cpu


def _wrote(node: str, python: str = "3.11.2 /usr/bin/python3", **fields: object) -> NodeProbe:
    values: dict[str, object] = {"job_id": "7", "state": "COMPLETED", "wrote": True}
    values.update(python=python, gpu_exit="0", gpu_lines=(GPU_LINE,))
    values.update(fields)
    return NodeProbe(node, "gpu", 2, **values)  # type: ignore[arg-type]


def test_a_node_whose_file_never_arrived_fails_the_run_directory_with_the_fix() -> None:
    outcome = ProbeOutcome(
        run_dir="/local/runs",
        nodes=[_wrote("n1"), NodeProbe("n2", "gpu", 2, job_id="8", state="FAILED, exit 1")],
    )
    check = run_dir_check(outcome, "/local/runs")
    assert not check.passed
    assert "n2" in check.detail and "FAILED, exit 1" in check.detail and "n1," not in check.detail
    assert "every compute node mount at the same path" in check.fix


def test_a_job_that_waited_too_long_is_named_as_not_run() -> None:
    waited = NodeProbe(
        "n2", "gpu", 2, job_id="8", state="still PENDING, Resources after 5 s; cancelled"
    )
    check = run_dir_check(ProbeOutcome(run_dir="/r", nodes=[_wrote("n1"), waited]), "/r")
    assert not check.passed and "had not finished" in check.fix and "mount" not in check.fix


def test_python_older_than_the_agent_needs_is_named() -> None:
    outcome = ProbeOutcome(
        run_dir="/r", nodes=[_wrote("n1"), _wrote("n2", python="3.6.8 /usr/bin/python3")]
    )
    check = python_check(outcome, "3.11.2 /usr/bin/python3")
    assert not check.passed and "missing on n2" in check.detail
    assert python_check(
        ProbeOutcome(run_dir="/r", nodes=[_wrote("n1")]), "3.8.10 /usr/bin/python3"
    ).passed


def test_the_gpu_sampler_check_uses_the_portals_own_parser() -> None:
    sampler = sampler_format()
    assert sampler is not None and sampler.fields == tuple(GPU_QUERY_FIELDS)  # monitoring's
    assert sampler_check(ProbeOutcome(nodes=[_wrote("n1")]), sampler).passed
    bad = _wrote("n1", gpu_lines=("2026/12/06 12:00:00, 0, GPU-x, 87 %, 40321 MiB",))
    check = sampler_check(ProbeOutcome(nodes=[bad]), sampler)
    assert not check.passed and "the portal cannot parse" in check.detail
    missing = _wrote("n1", gpu_exit="not found on PATH (/usr/bin:/bin)", gpu_lines=())
    assert "nvidia-smi" in sampler_check(ProbeOutcome(nodes=[missing]), sampler).fix


def test_a_failed_check_prints_its_fix_and_the_summary_names_it() -> None:
    checks = [Check("A", True, "fine"), Check("B", False, "broken", "mend it")]
    assert checks[1].line() == "[FAILED] B: broken\n         To fix: mend it"
    assert Check.from_json(checks[1].as_json()) == checks[1]
    assert summary(checks) == "1 of 2 checks failed (B): fix them, then check again."


def test_the_readiness_task_is_registered_for_autodiscovery() -> None:
    assert task_named("clusters.onboarding.tasks.cluster_readiness_check").name.endswith(
        "cluster_readiness_check"
    )


def test_cluster_names_come_from_the_login_host() -> None:
    assert cluster_name_for("login1.alps.cscs.ch") == "login1"
    assert cluster_name_for("10.0.0.7") == "10007"


def test_a_cluster_name_already_taken_is_refused(cluster: Cluster) -> None:
    _, host_key = new_key_pair()
    new = NewCluster(host="login.alps.example", port=22, host_key=host_key, name=cluster.name)
    with pytest.raises(OnboardingError, match="exists already: check it with `cluster check alps`"):
        cluster_add(new=new)


def test_an_operator_key_that_is_no_private_key_is_refused(db: None) -> None:
    _, host_key = new_key_pair()
    new = NewCluster(
        host="login.x.example", port=22, host_key=host_key, name="x",
        operator_user="portal-svc", operator_key=host_key,
    )  # fmt: skip
    with pytest.raises(OnboardingError, match="not an unencrypted OpenSSH private key"):
        cluster_add(new=new)
    assert not Cluster.objects.filter(name="x").exists()


def test_checking_an_unknown_cluster_names_the_known_ones(cluster: Cluster) -> None:
    with pytest.raises(CommandError, match=r"No cluster named 'nosuch' \(known: alps\)"):
        call_command("cluster", "check", "nosuch", stdout=StringIO())


def test_only_staff_may_start_a_readiness_check(
    client: Client, member: User, outsider: User, cluster: Cluster
) -> None:
    button = reverse("cluster-readiness", args=[cluster.name])
    assert client.post(button)["Location"].startswith(reverse("login"))
    for user in (member, outsider):
        client.force_login(user)
        assert client.post(button).status_code == 403
    assert client.get(button).status_code == 405
    assert not ReadinessReport.objects.exists()


def test_the_admins_cluster_page_links_to_the_check(
    client: Client, staff: User, cluster: Cluster
) -> None:
    client.force_login(staff)
    page = client.get(reverse("admin:clusters_cluster_change", args=[cluster.pk])).content.decode()
    link = reverse("cluster-page", args=[cluster.name]) + "#readiness"
    assert f'href="{link}" id="check-readiness-link"' in page
    add = client.get(reverse("admin:clusters_cluster_add")).content.decode()
    assert 'id="cluster-add-steps"' in add and "manage.py cluster add HOST" in add


def test_a_second_press_while_a_check_runs_starts_no_second_one(
    staff: User, cluster: Cluster, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks() as queued:
        first = readiness_check_request(cluster=cluster, user=staff)
        again = readiness_check_request(cluster=cluster, user=staff)
    assert again == first and len(queued) == 1 and first.requested_by == staff


def test_a_check_that_ran_out_of_time_says_so(cluster: Cluster) -> None:
    report = ReadinessReport.objects.create(cluster=cluster)
    readiness_check_abandon(report_id=report.pk, why="the check took longer than 300 s")
    report.refresh_from_db()
    assert report.state == ReadinessReport.State.DONE and not report.passed
    assert report.checks[0]["detail"] == "the check took longer than 300 s"
