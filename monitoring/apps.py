from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"

    def ready(self) -> None:
        # Once the apps are loaded: the poll (jobs) runs monitoring's watchers without
        # importing monitoring, and streams hear of access that ends; a cluster's readiness
        # check parses its nodes' nvidia-smi with the GPU sampler's own parser.
        from clusters.onboarding.sampler import SamplerFormat, sampler_register
        from jobs.poll.pipeline import pipeline_register
        from jobs.rundir import GPU_QUERY_FIELDS
        from monitoring.live.access import connect_receivers
        from monitoring.pipeline import monitoring_pipeline
        from monitoring.reading.gpu import parse_gpu_line

        connect_receivers()
        pipeline_register(monitoring_pipeline())
        sampler_register(SamplerFormat(fields=tuple(GPU_QUERY_FIELDS), parse_line=parse_gpu_line))
