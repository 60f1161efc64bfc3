"""What monitoring does with each poll's agent reply: its watchers, in this order.

1. Ingest (`monitoring.ingest.watch`) stores the new log bytes, metric points and GPU
   samples, and pushes the deltas; everything after it reads what it stored. It alone
   also reads the jobs with a page open between the slices of a long poll. Trainers' own
   record files (`monitoring.ingest.records`) follow it: a metric they give replaces stdout's.
2. Progress (`monitoring.hangs.watch`): each rank's progress, and a hang's cancel, decided
   before the failure watcher looks at how the attempt ended.
3. Preflight (`monitoring.diagnosis.preflight`): an attempt its preflight ended is
   diagnosed and submitted again without the faulty nodes, which the failure watcher then
   leaves alone. Failures (`monitoring.diagnosis.failures`): checkpoints, the diagnosis of
   an ended attempt from the log bytes this poll stored, and its restart.
4. Node ledger (`monitoring.nodes.watch`): an ended attempt's word on its nodes, from the
   diagnosis the failure watcher stored; a node judged bad is avoided from then on.
5. Goodput (`monitoring.goodput.watch`), last: it reads the samples and steps this poll
   stored and the restart the failure watcher decided.
"""

from jobs.poll.pipeline import Pipeline
from monitoring.diagnosis.failures import FailureWatcher
from monitoring.diagnosis.preflight import PreflightWatcher
from monitoring.goodput.watch import GoodputWatcher
from monitoring.hangs.watch import ProgressWatcher
from monitoring.ingest.records import RecordsWatcher
from monitoring.ingest.watch import MonitoringWatcher
from monitoring.nodes.watch import NodeLedgerWatcher


def monitoring_pipeline() -> Pipeline:
    ingest = MonitoringWatcher()
    return Pipeline(
        watchers=(
            ingest,
            RecordsWatcher(),
            ProgressWatcher(),
            PreflightWatcher(),
            FailureWatcher(),
            NodeLedgerWatcher(),
            GoodputWatcher(),
        ),
        page_watchers=(ingest,),
    )
