from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"

    def ready(self) -> None:
        # Once the apps are loaded: the poll (jobs) runs monitoring's watchers without
        # importing monitoring, and streams hear of access that ends.
        from jobs.poll.pipeline import pipeline_register
        from monitoring.live.access import connect_receivers
        from monitoring.pipeline import monitoring_pipeline

        connect_receivers()
        pipeline_register(monitoring_pipeline())
