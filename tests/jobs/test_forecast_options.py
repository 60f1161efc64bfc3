"""The alternatives the submit form shows expected starts for (jobs.queue.forecast)."""

import dataclasses
from datetime import timedelta

from clusters.inventory import PartitionLimits
from clusters.models import Cluster
from jobs.queue.forecast import MAX_OPTIONS, start_options
from tests import factories


def _partition(name: str, *, default: bool = False, gpus: int = 4, nodes: int = 8, hours=None):
    return PartitionLimits(
        name=name,
        is_default=default,
        nodes=nodes,
        gpus_per_node=gpus,
        cpus_per_node=64,
        memory_mb_per_node=512_000,
        max_time=timedelta(hours=hours) if hours else None,
    )


PARTITIONS = {
    "gpu": _partition("gpu", default=True),
    "short": _partition("short", hours=1),
    "small": _partition("small", gpus=1),
}


def test_the_choice_then_partitions_that_fit_fewer_gpus_and_a_shorter_limit(db) -> None:
    alps = factories.cluster("alps")
    spec = factories.spec(gpus_per_node=4, time_limit=timedelta(minutes=50))
    options = start_options(spec=spec, cluster=alps, partitions=PARTITIONS, others={})
    assert [o.label for o in options] == [
        "As chosen",
        "Partition short",  # "small" has 1 GPU per node: the job does not fit
        "2 GPUs per node instead of 4",
        "Time limit 25 min instead of 50 min",
    ]
    assert options[0].chosen and options[0].spec == spec
    assert options[2].spec == dataclasses.replace(spec, gpus_per_node=2)
    assert options[3].spec.time_limit == timedelta(minutes=25)


def test_a_long_job_is_not_offered_a_partition_whose_limit_is_shorter(db) -> None:
    spec = factories.spec(gpus_per_node=1, time_limit=timedelta(hours=3), partition="gpu")
    options = start_options(
        spec=spec, cluster=factories.cluster("alps"), partitions=PARTITIONS, others={}
    )
    assert [o.label for o in options] == [
        "As chosen",
        "Partition small",
        "Time limit 1 h 30 min instead of 3 h",
    ]


def test_other_clusters_keep_the_partition_by_name_or_take_their_default(db) -> None:
    alps, bern, chur = (factories.cluster(n) for n in ("alps", "bern", "chur"))
    spec = factories.spec(gpus_per_node=2, nodes=2, partition="short")
    others: dict[Cluster, dict[str, PartitionLimits]] = {
        bern: {"short": _partition("short"), "gpu": _partition("gpu", default=True)},
        chur: {"batch": _partition("batch", default=True, gpus=8)},
    }
    options = start_options(spec=spec, cluster=alps, partitions=PARTITIONS, others=others)
    moved = {o.cluster.name: o.spec.partition for o in options if o.label.startswith("On ")}
    assert moved == {"bern": "short", "chur": ""}  # "" is chur's default partition
    assert len(options) <= MAX_OPTIONS


def test_a_one_gpu_job_on_several_nodes_is_offered_half_the_nodes(db) -> None:
    spec = factories.spec(gpus_per_node=1, nodes=4, time_limit=timedelta(minutes=15))
    labels = [
        o.label
        for o in start_options(
            spec=spec, cluster=factories.cluster("alps"), partitions=PARTITIONS, others={}
        )
    ]
    assert "2 nodes instead of 4" in labels
    assert not any(label.startswith("Time limit") for label in labels)  # 7 min is too short
