"""Monitoring data: one module per concept, re-exported here for Django."""

from monitoring.models.alerts import Alert, AlertKind, AlertRule, AlertState  # noqa: F401
from monitoring.models.checkpoints import (  # noqa: F401
    BestMode,
    Checkpoint,
    CheckpointDeletion,
    CheckpointRule,
)
from monitoring.models.goodput import (  # noqa: F401
    AttemptActivity,
    EfficiencyCard,
    GoodputDigest,
)
from monitoring.models.ingest import AttemptIngest  # noqa: F401
from monitoring.models.logs import LogChunk, LogFile  # noqa: F401
from monitoring.models.nodes import NodeEvent, NodeHealth, NodeSignal, Verdict  # noqa: F401
from monitoring.models.progress import AttemptProgress  # noqa: F401
from monitoring.models.records import RecordFile, RecordSearch  # noqa: F401
from monitoring.models.runs import RunSummary  # noqa: F401
from monitoring.models.series import (  # noqa: F401
    Series,
    SeriesBlock,
    SeriesChunk,
    SeriesHead,
)
