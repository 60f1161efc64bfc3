"""The poll runs monitoring's watchers in the one order `monitoring.pipeline` gives its reasons for."""

from jobs.poll.pipeline import poll_pipeline
from monitoring.diagnosis.failures import FailureWatcher
from monitoring.diagnosis.preflight import PreflightWatcher
from monitoring.goodput.watch import GoodputWatcher
from monitoring.hangs.watch import ProgressWatcher
from monitoring.ingest.records import RecordsWatcher
from monitoring.ingest.watch import MonitoringWatcher
from monitoring.nodes.watch import NodeLedgerWatcher


def test_the_apps_register_the_watchers_once_in_order() -> None:
    pipeline = poll_pipeline()
    kinds = [type(watcher) for watcher in pipeline.watchers]
    assert kinds == [
        MonitoringWatcher,
        RecordsWatcher,
        ProgressWatcher,
        PreflightWatcher,
        FailureWatcher,
        NodeLedgerWatcher,
        GoodputWatcher,
    ]
    # Only the ingest reads the jobs with a page open between slices: the same object.
    assert pipeline.page_watchers == (pipeline.watchers[0],)
