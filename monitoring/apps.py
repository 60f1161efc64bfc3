from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"

    def ready(self) -> None:
        # The poller (jobs) reads run-directory files for us in its one agent call;
        # registering here keeps jobs free of any import of monitoring.
        from jobs.polling import FILE_WATCHERS, PAGE_WATCHERS
        from monitoring.diagnosis.failures import FailureWatcher
        from monitoring.goodput.watch import GoodputWatcher
        from monitoring.hangs.watch import ProgressWatcher
        from monitoring.ingest.watch import MonitoringWatcher
        from monitoring.live.access import connect_receivers

        connect_receivers()

        if not any(isinstance(w, MonitoringWatcher) for w in FILE_WATCHERS):
            FILE_WATCHERS.append(MonitoringWatcher())
            # The log and metrics of a job with a page open: read between a long poll's slices.
            PAGE_WATCHERS.append(FILE_WATCHERS[-1])
        # After the log watcher, before the failures: a hang's cancel is decided first.
        if not any(isinstance(w, ProgressWatcher) for w in FILE_WATCHERS):
            FILE_WATCHERS.append(ProgressWatcher())
        # After the log watcher: the diagnosis reads the log bytes this poll stored.
        if not any(isinstance(w, FailureWatcher) for w in FILE_WATCHERS):
            FILE_WATCHERS.append(FailureWatcher())
        # Last: it reads the samples and steps this poll stored, and the restart it decided.
        if not any(isinstance(w, GoodputWatcher) for w in FILE_WATCHERS):
            FILE_WATCHERS.append(GoodputWatcher())
