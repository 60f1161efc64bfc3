from decimal import Decimal
from typing import Protocol

from django.contrib.auth import get_user_model
from django.db import transaction

from clusters.models import Authentication, Cluster, ClusterAccount
from clusters.slurm.tools import DEFAULT_SLURM_BIN_DIR

SANDBOX_CLUSTER_NAME = "sandbox"
# An H200's dense bf16 peak, per GPU (NVIDIA's datasheet, without sparsity).
H200_PEAK_BF16_TFLOPS = 989.0
# The sandbox's prices: a GPU-hour, and a CPU-hour so that CPU-only jobs cost something
# there too (about a cloud vCPU-hour's price).
SANDBOX_PRICE_PER_GPU_HOUR = Decimal("2.50")
SANDBOX_PRICE_PER_CPU_HOUR = Decimal("0.05")


class SandboxDescription(Protocol):
    @property
    def ssh_host(self) -> str: ...
    @property
    def ssh_port(self) -> int: ...
    @property
    def host_key(self) -> str: ...
    @property
    def users(self) -> dict[str, str]: ...
    @property
    def base_run_dir(self) -> str: ...
    @property
    def partition(self) -> str: ...
    @property
    def gpu_model(self) -> str: ...
    @property
    def portal_user(self) -> str: ...
    @property
    def portal_key(self) -> str: ...
    @property
    def slurm_conf(self) -> str: ...


@transaction.atomic
def cluster_register_sandbox(
    *,
    info: SandboxDescription,
    name: str = SANDBOX_CLUSTER_NAME,
    authentication: Authentication = Authentication.STORED_KEY,
    operator_by_certificate: bool = False,
) -> Cluster:
    """Record the sandbox cluster, its portal account and one personal account per user.

    The personal accounts log in with the sandbox's keys, or by `authentication`
    certificate, holding no key (the login node trusts the portal's CAs). With
    `operator_by_certificate` the cluster trusts the portal's CA and the portal account
    logs in by certificate too: no private key is recorded anywhere.

    Portal users of the same names are created without a usable password when
    missing, so that each sandbox login belongs to someone. Another `name` records the
    same machines a second time, as a second cluster (tests of routing per cluster).
    """
    cluster, _ = Cluster.objects.update_or_create(
        name=name,
        defaults={
            "ssh_host": info.ssh_host,
            "ssh_port": info.ssh_port,
            "host_key": info.host_key,
            "base_run_dir": info.base_run_dir,
            "default_partition": info.partition,
            "gpu_model": f"NVIDIA {info.gpu_model} (stand-in)",
            "gpu_peak_bf16_tflops": H200_PEAK_BF16_TFLOPS,
            "price_per_gpu_hour": SANDBOX_PRICE_PER_GPU_HOUR,
            "price_per_cpu_hour": SANDBOX_PRICE_PER_CPU_HOUR,
            "is_active": True,
            "portal_username": info.portal_user,
            "portal_private_key": "" if operator_by_certificate else info.portal_key,
            "slurm_bin_dir": DEFAULT_SLURM_BIN_DIR,
            "slurm_conf": info.slurm_conf,
            # Set, never cleared here: an admin may have ticked it for the user accounts.
            **({"trusts_portal_ca": True} if operator_by_certificate else {}),
        },
    )
    user_model = get_user_model()
    for username, private_key in sorted(info.users.items()):
        user, created = user_model.objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        by_certificate = authentication == Authentication.CERTIFICATE
        ClusterAccount.objects.update_or_create(
            cluster=cluster,
            user=user,
            defaults={
                "username": username,
                "authentication": authentication,
                "private_key": "" if by_certificate else private_key,
            },
        )
    return cluster
