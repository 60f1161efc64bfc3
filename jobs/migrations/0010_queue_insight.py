from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0009_hang_failure_class_and_policy"),
    ]

    operations = [
        migrations.AddField(
            model_name="attempt",
            name="expected_start_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                fields=["cluster", "partition", "nodes", "gpus_per_node"], name="job_cluster_shape"
            ),
        ),
    ]
