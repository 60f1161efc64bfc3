"""Attempts that ended without a Slurm job have nothing left to read (jobs.states)."""

from django.db import migrations

FINAL = ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"]


def mark_read(apps, schema_editor) -> None:
    attempt = apps.get_model("jobs", "Attempt")
    attempt.objects.filter(state__in=FINAL, slurm_job_id="", files_complete=False).update(
        files_complete=True
    )


class Migration(migrations.Migration):
    dependencies = [("jobs", "0012_job_params")]

    operations = [migrations.RunPython(mark_read, migrations.RunPython.noop)]
