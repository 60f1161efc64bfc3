"""The ports a job's rendezvous listens on: MASTER_PORT is the first plus the Slurm job
id modulo their count (`jobs.scripts`, examples/ddp_train.py). Below the usual ephemeral
range (32768 and up), so no client socket holds one; the sandbox's tenant firewall
(`clusters.sandbox.isolation`) lets jobs reach exactly these."""

RENDEZVOUS_PORTS = (15000, 29999)


def master_port_shell() -> str:
    """The batch script's arithmetic for MASTER_PORT, from $SLURM_JOB_ID."""
    low, high = RENDEZVOUS_PORTS
    return f"$(({low} + SLURM_JOB_ID % {high - low + 1}))"
