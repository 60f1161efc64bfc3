import uuid
from datetime import timedelta

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from clusters.models import Cluster, ClusterAccount
from jobs.enums import (  # noqa: F401  (the models' own names, and re-exported)
    DEFAULT_RESTART_ON,
    FINAL_STATES,
    LIVE_STATES,
    NEVER_RESTART,
    FailureClass,
    State,
    Template,
)
from projects.models import Project

MAX_RESTARTS_LIMIT = 20
MAX_SLURM_REASON = 128


def default_restart_on() -> list[str]:
    return [str(c) for c in DEFAULT_RESTART_ON]


class CodeSnapshot(models.Model):
    """A code directory as one tar archive, stored once per project by its SHA-256.

    The file lives at `jobs.code.snapshots.snapshot_path(sha256)` (under CODE_SNAPSHOT_DIR),
    shared by every project that uploaded the same bytes; a row per project keeps one
    project's snapshots out of another's reach.
    """

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="code_snapshots")
    sha256 = models.CharField(max_length=64, validators=[RegexValidator(r"^[0-9a-f]{64}$")])
    size = models.BigIntegerField(help_text="Bytes of the archive as stored.")
    unpacked_size = models.BigIntegerField(help_text="Bytes of its files, unpacked.")
    files = models.PositiveIntegerField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="code_snapshots"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Uploaded again or looked up by its hash: a snapshot no job or sweep names is removed
    # CODE_SNAPSHOT_RETENTION after this (jobs.code.retention).
    last_used_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "sha256"], name="codesnapshot_unique_hash")
        ]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.project})"


class CodeSnapshotRemoval(models.Model):
    """A snapshot removed by the retention or by its project: which bytes, whose, when last
    used, by whom."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    sha256 = models.CharField(max_length=64)
    size = models.BigIntegerField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    last_used_at = models.DateTimeField()
    removed_at = models.DateTimeField()
    # Who deleted it; blank: the retention removed it.
    removed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Whether the file went too (no other project keeps the same bytes).
    file_removed = models.BooleanField()

    class Meta:
        ordering = ["-removed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.project}) removed {self.removed_at:%Y-%m-%d}"


class CodeUpload(models.Model):
    """One archive a person sent (stored or not): what the upload rate counts."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    size = models.BigIntegerField()
    at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["user", "at"], name="codeupload_user_at")]

    def __str__(self) -> str:
        return f"{self.user} sent {self.size} bytes to {self.project} at {self.at:%H:%M:%S}"


class CodeSource(models.Model):
    """The code a command runs in, and where it came from: a job's, or a sweep's for all
    of its trials."""

    # `code`, the snapshot, is each concrete model's own foreign key (its reverse name).
    code_id: int | None
    # A git checkout's commit, branch and uncommitted diff (from the client), or a git URL
    # and ref the portal fetches before the first attempt.
    code_commit = models.CharField(max_length=64, blank=True)
    code_branch = models.CharField(max_length=255, blank=True)
    code_diff = models.TextField(blank=True)
    code_diff_truncated = models.BooleanField(default=False)
    code_git_url = models.CharField(max_length=1024, blank=True)
    code_git_ref = models.CharField(max_length=255, blank=True)

    class Meta:
        abstract = True

    @property
    def has_code(self) -> bool:
        """Whether the command runs in a code snapshot (uploaded, or fetched from a git URL)."""
        return self.code_id is not None or bool(self.code_git_url)


class Job(CodeSource):
    """What the researcher asked for; each submission to Slurm is an Attempt."""

    # Unpacked into each attempt's run directory, the command's working directory; every
    # attempt and every clone uses this one snapshot.
    code = models.ForeignKey(
        CodeSnapshot, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="jobs")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs"
    )
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="jobs")
    name = models.CharField(
        max_length=128,
        validators=[
            RegexValidator(r"^[\w.+-][\w .+-]*$", "Use letters, digits, spaces and '._+-'.")
        ],
    )
    template = models.CharField(max_length=16, choices=Template.choices, default=Template.COMMAND)
    command = models.TextField(help_text="What to run (for torchrun: the script and arguments).")
    nodes = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(1024)]
    )
    gpus_per_node = models.PositiveIntegerField(
        default=1, validators=[MaxValueValidator(64)], verbose_name="GPUs per node"
    )
    cpus_per_task = models.PositiveIntegerField(
        default=4, validators=[MinValueValidator(1), MaxValueValidator(1024)]
    )
    memory_mb = models.PositiveIntegerField(
        null=True, blank=True, verbose_name="memory per node (MB)", help_text="Blank: the default."
    )
    time_limit = models.DurationField(default=timedelta(hours=1))
    partition = models.CharField(max_length=64, blank=True)
    setup = models.TextField(
        blank=True,
        verbose_name="environment set-up",
        help_text="Shell lines run before the command (module load, conda activate, ...).",
    )
    model_params = models.BigIntegerField(
        null=True,
        blank=True,
        verbose_name="model parameters",
        help_text="For MFU: the model's parameter count (6 x params FLOPs per token).",
    )
    total_steps = models.PositiveIntegerField(
        null=True, blank=True, help_text="The last training step, for the ETA."
    )
    metric_patterns = models.TextField(
        blank=True,
        help_text="Extra regular expressions (one per line) with named groups for metrics "
        "printed to stdout, e.g. `acc=(?P<acc>[0-9.]+)`.",
    )
    # Restart policy: a failure of a class in `restart_on` starts a new attempt from
    # the latest complete checkpoint, at most `max_restarts` times.
    max_restarts = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(MAX_RESTARTS_LIMIT)],
        help_text="Restarts after a failure a retry can fix; 0: never restart.",
    )
    restart_on = models.JSONField(
        default=default_restart_on,
        blank=True,
        help_text="Failure classes that restart the job (CUDA OOM and missing modules never do).",
    )
    exclude_failed_nodes = models.BooleanField(
        default=False, help_text="Restart without the node that failed (sbatch --exclude)."
    )
    # Preflight (jobs.preflight): each node checks its GPUs and joins a small all-reduce
    # before the command; a faulty node is left out and the attempt submitted again.
    preflight = models.BooleanField(
        default=False,
        help_text="Check every node (GPUs, a small all-reduce) before the command starts.",
    )
    # Hang detection (monitoring.hangs.rules); blank: the portal's HANG_POLICY.
    hang_multiple = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1.0)],
        help_text="Hung after this many times the recent step interval without a step.",
    )
    hang_floor_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Never hung before this many seconds without a step.",
    )
    startup_window_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="A startup stall when no first step comes within this many seconds.",
    )
    # The run's parameter table (jobs.params): {key: number | bool | text}, and per key
    # where it came from ("command", "given", "logged"). On PostgreSQL a GIN index
    # (jsonb_path_ops, made by migration 0011 there only) serves `params @> {...}`.
    params = models.JSONField(default=dict, blank=True)
    param_sources = models.JSONField(default=dict, blank=True)
    # What the researcher says of the run (jobs.notes checks them, jobs.services.job_annotate
    # writes them). Tags are a JSON list, not an ArrayField, so that the local run's SQLite
    # keeps them too; on PostgreSQL a GIN index (jsonb_path_ops, made by migration 0019 there
    # only) serves the runs table's `tags @> '["x"]'`, and (project, group) is an index.
    note = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    group = models.CharField(max_length=64, blank=True)
    # A fork's lineage (jobs.lineage): the job it started from, and that job's checkpoint
    # (its path on the cluster, which PORTAL_RESUME_FROM names) and step. The path stays
    # when the parent's checkpoint is later deleted.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    parent_checkpoint = models.CharField(max_length=1024, blank=True)
    parent_step = models.BigIntegerField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "-created_at"], name="job_user_recent"),
            # The runs table's default order (monitoring.runs.table).
            models.Index(fields=["project", "-created_at", "-id"], name="job_project_recent"),
            models.Index(fields=["project", "state"], name="job_project_state"),
            # The runs table's group filter and compare's groups.
            models.Index(fields=["project", "group"], name="job_project_group"),
            models.Index(fields=["cluster", "state"], name="job_cluster_state"),
            # How long similar jobs waited (jobs.queue.waits): the jobs of one shape on a cluster.
            models.Index(
                fields=["cluster", "partition", "nodes", "gpus_per_node"], name="job_cluster_shape"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def total_cpus(self) -> int:
        # One task per node (sbatch --ntasks-per-node=1), cpus_per_task CPUs each.
        return self.nodes * self.cpus_per_task

    @property
    def is_finished(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def gpus_requested(self) -> int:
        return self.total_gpus


class Attempt(models.Model):
    """One submission of a job to Slurm; a resubmission is a new attempt."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    # Put in the Slurm job's name and comment, so a job whose sbatch reply was
    # lost can be found and adopted instead of submitted twice.
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    account = models.ForeignKey(
        ClusterAccount, null=True, on_delete=models.PROTECT, related_name="attempts"
    )
    run_dir = models.CharField(max_length=1024, blank=True)
    resume_from = models.CharField(max_length=1024, blank=True)
    slurm_job_id = models.CharField(max_length=32, blank=True)
    node_list = models.CharField(max_length=1024, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    reason = models.TextField(blank=True, help_text="Why the attempt is in its state.")
    # Slurm's reason a pending job waits (squeue %r: Resources, Priority, ...), as the
    # latest poll saw it; blank once it runs.
    slurm_reason = models.CharField(max_length=MAX_SLURM_REASON, blank=True)
    # Slurm's own estimate of a pending job's start (squeue StartTime, which `squeue
    # --start` prints), read at most every QUEUE_ESTIMATE_INTERVAL; None: no estimate.
    expected_start_at = models.DateTimeField(null=True, blank=True)
    # Slurm's first estimate (expected_start_at as first read) and when it was read: what
    # the portal's history of predicted against actual starts learns from (jobs.queue.forecast).
    first_estimate_at = models.DateTimeField(null=True, blank=True)
    first_estimate_read_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # Set once the files of a finished attempt have been read to their end;
    # until then polls keep reading them (never its state).
    files_complete = models.BooleanField(default=False)
    # The diagnosis of an ended attempt (monitoring.diagnosis.diagnose), made once its log is read.
    failure_class = models.CharField(max_length=32, choices=FailureClass.choices, blank=True)
    diagnosis = models.JSONField(null=True, blank=True)
    diagnosed_at = models.DateTimeField(null=True, blank=True)
    # Nodes this attempt was submitted without (sbatch --exclude), comma-separated.
    excluded_nodes = models.CharField(max_length=1024, blank=True)
    # The job's preflight resubmissions before this attempt (jobs.preflight): not restarts,
    # they use none of the restart budget.
    preflight_resubmits = models.PositiveIntegerField(default=0)
    state_changed_at = models.DateTimeField(auto_now_add=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["job", "number"]
        constraints = [
            models.UniqueConstraint(fields=["job", "number"], name="attempt_unique_number")
        ]
        indexes = [models.Index(fields=["state"], name="attempt_state")]

    def __str__(self) -> str:
        return f"{self.job} attempt {self.number}"

    @property
    def slurm_job_name(self) -> str:
        return f"portal-{self.uuid}"

    @property
    def is_finished(self) -> bool:
        return self.state in FINAL_STATES


class JobEvent(models.Model):
    """One state change of an attempt: when, from what, to what, and why."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    attempt = models.ForeignKey(Attempt, null=True, on_delete=models.CASCADE, related_name="events")
    time = models.DateTimeField()
    from_state = models.CharField(max_length=16, choices=State.choices, blank=True)
    to_state = models.CharField(max_length=16, choices=State.choices)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["time", "id"]
        indexes = [models.Index(fields=["job", "time"], name="jobevent_job_time")]

    def __str__(self) -> str:
        return f"{self.job}: {self.from_state or '-'} -> {self.to_state}"
