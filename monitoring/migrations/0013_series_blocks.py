# A poll's points per attempt in one SeriesBlock row, each attempt's last points in its
# SeriesHead (monitoring.series_write): nothing is written per series per poll any more.
# Existing chunks stay as they are (a series' level-0 chunks merge at its next
# compaction); each attempt's head is made from its Series rows' last points.

import json
import struct
import zlib
from itertools import accumulate

import django.db.models.deletion
from django.db import migrations, models

FANOUT = 16  # monitoring.series_compact.FANOUT when this was written
HOT_FILLFACTOR = 50
BATCH = 1000


def _pack(names, counts, xs, ys):
    """monitoring.blocks' layout, as it was when this was written."""
    text = json.dumps([names, counts], separators=(",", ":")).encode()
    padding = -(4 + len(text)) % 8
    floats = struct.pack(f"<{len(xs) + len(ys)}d", *xs, *ys)
    return struct.pack("<I", len(text)) + text + b" " * padding + floats


def _unpack(data):
    data = bytes(data)
    if not data:
        return [], [], [], []
    (length,) = struct.unpack_from("<I", data)
    names, counts = json.loads(data[4 : 4 + length])
    start = 4 + length + (-(4 + length) % 8)
    values = struct.unpack_from(f"<{(len(data) - start) // 8}d", data, start)
    half = len(values) // 2
    return names, counts, list(values[:half]), list(values[half:])


def heads_from_series(apps, schema_editor):
    Series = apps.get_model("monitoring", "Series")
    SeriesHead = apps.get_model("monitoring", "SeriesHead")
    rows = Series.objects.order_by("attempt_id", "name").values_list(
        "attempt_id", "name", "last_x", "last_y"
    )
    heads, current, points = [], None, []

    def close():
        if current is not None:
            names = [name for name, _, _ in points]
            data = _pack(names, [1] * len(names), [x for _, x, _ in points], [y for *_, y in points])
            first = zlib.crc32(str(current).encode()) % (FANOUT - 1)
            heads.append(SeriesHead(attempt_id=current, blocks=first, points=0, data=data))

    for attempt_id, name, x, y in rows.iterator(chunk_size=BATCH):
        if attempt_id != current:
            close()
            current, points = attempt_id, []
            if len(heads) >= BATCH:
                SeriesHead.objects.bulk_create(heads)
                heads = []
        points.append((name, x, y))
    close()
    SeriesHead.objects.bulk_create(heads)


def series_from_heads(apps, schema_editor):
    """Back to per-series rows: last points from the heads, the blocks as level-0 chunks."""
    Series = apps.get_model("monitoring", "Series")
    SeriesChunk = apps.get_model("monitoring", "SeriesChunk")
    SeriesHead = apps.get_model("monitoring", "SeriesHead")
    SeriesBlock = apps.get_model("monitoring", "SeriesBlock")
    for attempt_id, data in SeriesHead.objects.values_list("attempt_id", "data").iterator():
        names, _, xs, ys = _unpack(data)
        for name, x, y in zip(names, xs, ys):
            Series.objects.update_or_create(
                attempt_id=attempt_id, name=name, defaults={"last_x": x, "last_y": y}
            )
    blocks = SeriesBlock.objects.order_by("id").values_list("attempt_id", "data")
    for attempt_id, data in blocks.iterator():
        names, counts, xs, ys = _unpack(data)
        starts = [0, *accumulate(counts)]
        for at, name in enumerate(names):
            pairs = sorted(zip(xs[starts[at] : starts[at + 1]], ys[starts[at] : starts[at + 1]]))
            if not pairs:
                continue
            series, _ = Series.objects.get_or_create(
                attempt_id=attempt_id,
                name=name,
                defaults={"last_x": pairs[-1][0], "last_y": pairs[-1][1]},
            )
            blob = struct.pack(
                f"<{2 * len(pairs)}d", *(x for x, _ in pairs), *(y for _, y in pairs)
            )
            SeriesChunk.objects.create(
                series=series,
                level=0,
                count=len(pairs),
                x_min=pairs[0][0],
                x_max=pairs[-1][0],
                y_min=min(y for _, y in pairs),
                y_max=max(y for _, y in pairs),
                data=blob,
                summary=blob,  # every point: a summary holds real points, here all of them
            )


def storage_params(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # Every poll rewrites each live head, and each followed file's row twice (its size,
        # its parser state): room on the page lets PostgreSQL update them in place (HOT).
        for table in ("monitoring_serieshead", "monitoring_logfile"):
            schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {HOT_FILLFACTOR})")
        # Series rows are no longer rewritten every poll (migration 0012 set it).
        schema_editor.execute("ALTER TABLE monitoring_series RESET (fillfactor)")


def storage_params_reset(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE monitoring_logfile RESET (fillfactor)")
        schema_editor.execute("ALTER TABLE monitoring_series SET (fillfactor = 50)")


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0012_job_params"),
        ("monitoring", "0012_series_write_path"),
    ]

    operations = [
        migrations.CreateModel(
            name="SeriesHead",
            fields=[
                (
                    "attempt",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="series_head",
                        serialize=False,
                        to="jobs.attempt",
                    ),
                ),
                ("blocks", models.PositiveSmallIntegerField(default=0)),
                ("points", models.PositiveIntegerField(default=0)),
                ("data", models.BinaryField(default=b"")),
            ],
        ),
        migrations.CreateModel(
            name="SeriesBlock",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("count", models.PositiveIntegerField()),
                ("data", models.BinaryField()),
                (
                    "attempt",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="series_blocks",
                        to="jobs.attempt",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["attempt", "id"], name="seriesblock_attempt")],
            },
        ),
        migrations.RunPython(heads_from_series, series_from_heads),
        migrations.RunPython(storage_params, storage_params_reset),
        # Defaults first, so that going back can add the columns to rows that exist.
        migrations.AlterField(
            model_name="series", name="last_x", field=models.FloatField(default=0.0)
        ),
        migrations.AlterField(
            model_name="series", name="last_y", field=models.FloatField(default=0.0)
        ),
        migrations.RemoveField(model_name="series", name="last_x"),
        migrations.RemoveField(model_name="series", name="last_y"),
        migrations.RemoveField(model_name="series", name="unmerged"),
    ]
