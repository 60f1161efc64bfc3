"""Job pages: who may see what, the submit form and its preview, the dashboard."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster, ClusterAccount
from jobs.enums import State
from jobs.models import Attempt, Job
from projects.models import Membership, Project
from tests import factories
from tests.factories import GPU_PARTITION


def _form(cluster: Cluster, project: Project, **overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "name": "resnet",
        "project": project.pk,
        "cluster": cluster.name,
        "partition": "gpu",
        "template": "command",
        "nodes": 1,
        "gpus_per_node": 1,
        "cpus_per_task": 2,
        "memory_mb": "",
        "time_limit": "0:30:00",
        "setup": "module load cuda",
        "command": "python train.py",
        "model_params": "125M",
        "total_steps": "",
        "metric_patterns": "",
    }
    data.update(overrides)
    return data


# --- who may see what -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "name", "args"),
    [
        ("get", "job-list", []),
        ("get", "job-new", []),
        ("post", "job-preview", []),
        ("post", "jobs-cancel", []),
        ("get", "job-states", []),
        ("post", "job-cancel", [1]),
        ("get", "home", []),
    ],
)
def test_logged_out_visitor_is_sent_to_login(
    client: Client, db: None, method: str, name: str, args: list[int]
) -> None:
    response = getattr(client, method)(reverse(name, args=args))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_outsider_sees_no_jobs_and_cannot_touch_them(
    client: Client, outsider: User, member: User, project: Project, cluster: Cluster
) -> None:
    job, _ = factories.job(project, member, cluster, name="secret-run", state=State.RUNNING)
    client.force_login(outsider)
    listing = client.get(reverse("job-list"))
    assert listing.status_code == 200
    assert b"secret-run" not in listing.content
    assert client.get(reverse("job-list"), {"project": "vision"}).context["rows"] == []
    assert client.get(reverse("job-new"), {"clone": job.pk}).status_code == 404
    assert client.post(reverse("job-cancel", args=[job.pk])).status_code == 404
    assert client.get(reverse("job-states"), {"ids": str(job.pk)}).json()["jobs"] == {}
    client.post(reverse("jobs-cancel"), {"job": [job.pk]})
    assert Attempt.objects.get(job=job).cancel_requested_at is None


def test_outsider_cannot_submit_into_the_project(
    client: Client,
    outsider: User,
    project: Project,
    cluster: Cluster,
    service_account: ClusterAccount,
) -> None:
    client.force_login(outsider)
    response = client.post(reverse("job-new"), _form(cluster, project))
    assert response.status_code == 200
    assert "Choose one of your projects" in str(response.context["form"].errors["project"])
    assert not Job.objects.exists()
    preview = client.post(reverse("job-preview"), _form(cluster, project)).json()
    assert preview["script"] == ""
    assert "project" in preview["errors"]


def test_viewer_role_cannot_submit(
    client: Client,
    django_user_model: type[User],
    project: Project,
    cluster: Cluster,
    service_account: ClusterAccount,
) -> None:
    viewer = django_user_model.objects.create_user("vera")
    Membership.objects.create(user=viewer, project=project, role=Membership.Role.VIEWER)
    client.force_login(viewer)
    client.post(reverse("job-new"), _form(cluster, project))
    assert not Job.objects.exists()


# --- the form ------------------------------------------------------------------------------


def test_submit_creates_the_job_and_opens_its_page(
    client: Client, member: User, project: Project, cluster: Cluster,
    service_account: ClusterAccount,
    django_capture_on_commit_callbacks,
) -> None:  # fmt: skip
    client.force_login(member)
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("job-new"), _form(cluster, project))
    job = Job.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("job-page", args=[job.pk])
    assert (job.name, job.partition, job.time_limit) == ("resnet", "gpu", timedelta(minutes=30))
    assert job.model_params == 125_000_000
    assert job.setup == "module load cuda"


def test_form_shows_inline_errors_naming_what_to_change(
    client: Client,
    member: User,
    project: Project,
    cluster: Cluster,
    service_account: ClusterAccount,
) -> None:
    client.force_login(member)
    response = client.post(
        reverse("job-new"), _form(cluster, project, time_limit="half an hour", model_params="big")
    )
    errors = response.context["form"].errors
    assert "write it as minutes (90), hours:minutes:seconds" in errors["time_limit"][0]
    assert "7B" in errors["model_params"][0]
    assert 'id="err-time_limit"' in response.content.decode()

    response = client.post(reverse("job-new"), _form(cluster, project, gpus_per_node=3))
    assert response.context["form"].errors["gpus_per_node"] == [
        "Nodes in partition gpu have 2 GPUs; ask for at most 2 per node."
    ]
    response = client.post(reverse("job-new"), _form(cluster, project, time_limit="3-00:00:00"))
    assert "shorten the time limit" in response.context["form"].errors["time_limit"][0]
    assert not Job.objects.exists()


def test_preview_gives_script_estimate_and_errors_and_writes_nothing(
    client: Client, member: User, project: Project, cluster: Cluster,
    service_account: ClusterAccount,
    django_assert_max_num_queries,
) -> None:  # fmt: skip
    cluster.price_per_gpu_hour = 2
    cluster.save()
    client.force_login(member)
    data = client.post(
        reverse("job-preview"), _form(cluster, project, nodes=2, time_limit="2:00:00")
    ).json()
    assert data["errors"] == {}
    assert "#SBATCH --nodes=2" in data["script"]
    assert "#SBATCH --gres=gpu:1" in data["script"]
    assert "module load cuda" in data["script"]
    assert data["estimate"]["gpu_hours"] == "4.00"
    assert data["estimate"]["cost"] == "8.00"
    assert data["estimate"]["left_before"] == "100.00"
    assert data["estimate"]["left_after"] == "96.00"
    # CPUs x nodes x hours, against the CPU-hour budget a new quota gets.
    cpus = data["estimate"]["cpus"]
    assert cpus >= 2 and data["estimate"]["cpu_hours"] == f"{cpus * 2:.2f}"
    assert data["estimate"]["cpu_left_before"] == "16,000.00"
    assert [p["name"] for p in data["partitions"]] == ["gpu"]

    bad = client.post(reverse("job-preview"), _form(cluster, project, gpus_per_node=4)).json()
    assert bad["errors"]["gpus_per_node"] == [
        "Nodes in partition gpu have 2 GPUs; ask for at most 2 per node."
    ]
    assert not Job.objects.exists()
    assert not Attempt.objects.exists()


def test_preview_checks_the_cluster_while_other_fields_are_still_wrong(
    client: Client,
    member: User,
    project: Project,
    cluster: Cluster,
    service_account: ClusterAccount,
) -> None:
    client.force_login(member)
    data = client.post(
        reverse("job-preview"), _form(cluster, project, command="", gpus_per_node=3)
    ).json()
    assert data["errors"] == {
        "command": ["Enter the command to run."],
        "gpus_per_node": ["Nodes in partition gpu have 2 GPUs; ask for at most 2 per node."],
    }
    assert data["script"] == ""


def test_preview_of_torchrun_template_shows_the_launcher(
    client: Client,
    member: User,
    project: Project,
    cluster: Cluster,
    service_account: ClusterAccount,
) -> None:
    client.force_login(member)
    data = client.post(
        reverse("job-preview"),
        _form(cluster, project, template="torchrun", nodes=2, command="train.py --epochs 1"),
    ).json()
    assert "torchrun" in data["script"]
    assert "train.py --epochs 1" in data["script"]


def test_clone_prefills_the_form(
    client: Client,
    member: User,
    owner: User,
    project: Project,
    cluster: Cluster,
    service_account: ClusterAccount,
) -> None:
    job, _ = factories.job(
        project, owner, cluster, name="base", command="python x.py", nodes=2, partition="gpu",
        time_limit=timedelta(hours=2), metric_patterns="acc=(?P<acc>[0-9.]+)",
    )  # fmt: skip
    client.force_login(member)
    form = client.get(reverse("job-new"), {"clone": job.pk}).context["form"]
    assert form["name"].value() == "base copy"
    assert form["command"].value() == "python x.py"
    assert form["nodes"].value() == 2
    assert form["time_limit"].value() == "2:00:00"
    assert form["cluster"].value() == cluster.name
    assert form["metric_patterns"].value() == "acc=(?P<acc>[0-9.]+)"
    assert client.get(reverse("job-new"), {"clone": "nope"}).status_code == 404


def test_cancel_from_the_job_page(
    client: Client, member: User, owner: User, project: Project, cluster: Cluster
) -> None:
    theirs, _ = factories.job(project, owner, cluster)
    client.force_login(member)
    response = client.post(reverse("job-cancel", args=[theirs.pk]), follow=True)
    assert "Only the job&#x27;s submitter or a project owner" in response.content.decode()
    assert Attempt.objects.get(job=theirs).state == State.QUEUED
    assert client.get(reverse("job-cancel", args=[theirs.pk])).status_code == 405
    page = client.get(reverse("job-page", args=[theirs.pk])).content.decode()
    assert 'id="job-cancel"' not in page, "a member who may not cancel is not offered to"

    client.force_login(owner)
    page = client.get(reverse("job-page", args=[theirs.pk])).content.decode()
    assert 'id="job-cancel"' in page
    assert f"?clone={theirs.pk}" in page
    client.post(reverse("job-cancel", args=[theirs.pk]))
    assert Attempt.objects.get(job=theirs).state == State.CANCELLED


# --- the dashboard ----------------------------------------------------------------------


def test_dashboard_lists_running_waiting_and_finished_jobs(
    client: Client,
    member: User,
    project: Project,
    cluster: Cluster,
    service_account: ClusterAccount,
) -> None:
    factories.job(project, member, cluster, name="runs", state=State.RUNNING)
    factories.job(project, member, cluster, name="waits", state=State.PENDING)
    factories.job(project, member, cluster, name="done", state=State.COMPLETED)
    client.force_login(member)
    context = client.get(reverse("home")).context
    assert [j.name for j in context["running"]] == ["runs"]
    assert [j.name for j in context["pending"]] == ["waits"]
    assert [j.name for j in context["recent"]] == ["done"]
    ((row_project, usage),) = context["project_rows"]
    assert row_project == project and usage.left_gpu_hours == 100
    assert [c.name for c, _ in context["clusters"]] == [cluster.name]


def test_dashboard_shows_the_outsider_nothing(
    client: Client, outsider: User, member: User, project: Project, cluster: Cluster
) -> None:
    factories.job(project, member, cluster, name="secret-run", state=State.RUNNING)
    client.force_login(outsider)
    response = client.get(reverse("home"))
    assert b"secret-run" not in response.content
    assert response.context["clusters"] == []


@pytest.mark.parametrize(
    ("template", "line"),
    [
        ("fsdp", ': "${TORCH_NCCL_AVOID_RECORD_STREAMS:=1}"'),
        ("deepspeed", ': "${TORCH_EXTENSIONS_DIR:=/tmp/torch-extensions-$SLURM_JOB_ID}"'),
    ],
)
def test_fsdp_and_deepspeed_scripts_set_their_environment_before_torchrun(
    client: Client,
    member: User,
    project: Project,
    cluster: Cluster,
    service_account: ClusterAccount,
    template: str,
    line: str,
) -> None:
    client.force_login(member)
    data = client.post(
        reverse("job-preview"),
        _form(cluster, project, template=template, setup="", command="train.py --zero 3"),
    ).json()
    lines = data["script"].splitlines()
    launch = next(i for i, text in enumerate(lines) if "torchrun" in text and "train.py" in text)
    assert line in lines[:launch]
    assert lines[launch].endswith("train.py --zero 3")


def test_new_form_asks_for_no_more_cpus_than_the_default_partition_has(
    client: Client, member: User, cluster: Cluster, service_account: ClusterAccount
) -> None:
    client.force_login(member)
    form = client.get(reverse("job-new")).context["form"]
    assert form["cpus_per_task"].value() == GPU_PARTITION.cpus_per_node == 2
    assert form["cluster"].value() is None or form["cluster"].value() == cluster.name


def test_preview_shows_how_long_similar_jobs_waited_on_the_cluster(
    client: Client, member: User, project: Project, cluster: Cluster,
    service_account: ClusterAccount,
) -> None:  # fmt: skip
    now = timezone.now()
    for minutes in (2, 4, 6, 8, 30):  # recorded history: 2 nodes x 1 GPU on gpu
        _, attempt = factories.job(project, member, cluster, partition="gpu", nodes=2)
        Attempt.objects.filter(pk=attempt.pk).update(
            state=State.COMPLETED,
            submitted_at=now - timedelta(hours=minutes),
            started_at=now - timedelta(hours=minutes) + timedelta(minutes=minutes),
        )
    client.force_login(member)
    data = client.post(reverse("job-preview"), _form(cluster, project, nodes=2)).json()
    # waits 2, 4, 6, 8, 30 min: median 6, p90 at rank 3.6 -> 8 + 0.6 * 22 = 21.2 min
    assert data["estimate"]["typical_wait"] == (
        "6 min median, 21 min p90 over 5 jobs (2 nodes x 1 GPU on gpu)"
    )
    single = client.post(reverse("job-preview"), _form(cluster, project, nodes=1)).json()
    assert single["estimate"]["typical_wait"] == (
        "none in the last 4 weeks, too few to tell (1 node x 1 GPU on gpu)"
    )
