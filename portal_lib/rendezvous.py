"""The ports a job's rendezvous listens on: MASTER_PORT is the first plus the Slurm job
id modulo their count (`jobs.scripts`, examples/ddp_train.py). Below the usual ephemeral
range (32768 and up), so no client socket holds one; the sandbox's tenant firewall
(`clusters.sandbox.isolation`) lets jobs reach exactly these."""

RENDEZVOUS_PORTS = (15000, 29999)


def master_port_shell() -> str:
    """The batch script's arithmetic for MASTER_PORT, from $SLURM_JOB_ID."""
    low, high = RENDEZVOUS_PORTS
    return f"$(({low} + SLURM_JOB_ID % {high - low + 1}))"


def preflight_port_shell() -> str:
    """The preflight's all-reduce port: half the range away from MASTER_PORT, so that the
    trainer's rendezvous never meets the preflight's socket in TIME_WAIT."""
    low, high = RENDEZVOUS_PORTS
    count = high - low + 1
    return f"$(({low} + (SLURM_JOB_ID + {count // 2}) % {count}))"
