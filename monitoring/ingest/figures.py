"""How much the polls stored (metric points, GPU samples, run-directory bytes), for /metrics."""

from collections.abc import Sequence

from jobs.rundir import gpu_series
from monitoring.logs.store import Stored
from monitoring.series.points import Point
from portal_lib.health import health_record

POINTS, GPU_SAMPLES, FILE_BYTES = "ingest:points", "ingest:gpu_samples", "ingest:file_bytes"


def ingest_record(*, points: Sequence[Point], stored: Sequence[Stored]) -> None:
    """Count what one poll of one account stored."""
    gpu = sum(1 for _, name, _, _ in points if gpu_series(name) is not None)
    health_record(
        add={
            POINTS: float(len(points) - gpu),
            GPU_SAMPLES: float(gpu),
            FILE_BYTES: float(sum(len(s.data) for s in stored)),
        }
    )
