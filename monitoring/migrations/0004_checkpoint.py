import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0006_restart_policy_and_diagnosis"),
        ("monitoring", "0003_logfile_metric_names"),
    ]

    operations = [
        migrations.CreateModel(
            name="Checkpoint",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=255)),
                ("step", models.BigIntegerField(blank=True, null=True)),
                ("size", models.BigIntegerField(default=0)),
                ("modified_at", models.DateTimeField()),
                ("is_dir", models.BooleanField(default=False)),
                ("complete", models.BooleanField(default=True)),
                (
                    "attempt",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="checkpoints",
                        to="jobs.attempt",
                    ),
                ),
            ],
            options={"ordering": ["attempt", "step", "name"]},
        ),
        migrations.AddConstraint(
            model_name="checkpoint",
            constraint=models.UniqueConstraint(
                fields=("attempt", "name"), name="checkpoint_unique_name"
            ),
        ),
    ]
