import django.core.validators
from django.db import migrations, models

import jobs.models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0005_job_templates_fsdp_deepspeed"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="max_restarts",
            field=models.PositiveIntegerField(
                default=0,
                help_text="Restarts after a failure a retry can fix; 0: never restart.",
                validators=[django.core.validators.MaxValueValidator(20)],
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="restart_on",
            field=models.JSONField(
                blank=True,
                default=jobs.models.default_restart_on,
                help_text="Failure classes that restart the job (CUDA OOM and missing modules "
                "never do).",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="exclude_failed_nodes",
            field=models.BooleanField(
                default=False,
                help_text="Restart without the node that failed (sbatch --exclude).",
            ),
        ),
        migrations.AddField(
            model_name="attempt",
            name="failure_class",
            field=models.CharField(
                blank=True,
                choices=[
                    ("nccl_timeout", "NCCL timeout"),
                    ("cuda_oom", "CUDA out of memory"),
                    ("host_oom", "Host out of memory"),
                    ("node_failure", "Node failure"),
                    ("time_limit", "Time limit"),
                    ("preemption", "Preemption"),
                    ("address_in_use", "Rendezvous port in use"),
                    ("missing_module", "Missing Python module"),
                    ("missing_file", "Missing file"),
                    ("rank_crash", "A rank crashed"),
                    ("cancelled", "Cancelled"),
                    ("unknown", "Unknown failure"),
                ],
                max_length=32,
            ),
        ),
        migrations.AddField(
            model_name="attempt",
            name="diagnosis",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="attempt",
            name="diagnosed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="attempt",
            name="excluded_nodes",
            field=models.CharField(blank=True, max_length=1024),
        ),
    ]
