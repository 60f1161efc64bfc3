"""The node health ledger's settings (monitoring.nodes): what each signal weighs, how a
score fades, where the verdicts start, and how long a bad node is avoided. Read from the
environment like the rest (`portal.settings.base` imports them)."""

import environ

env = environ.Env()

# What one signal that blames a node adds to its score (monitoring.nodes.signals): a GPU
# hardware fault or a node failure is the node's own; a hang's culprit or an NCCL timeout
# that names a node is likelier the node's than not; a straggler is a hint.
NODE_SIGNAL_WEIGHTS: dict[str, float] = {
    "gpu_hardware": env.float("NODE_WEIGHT_GPU_HARDWARE", default=1.0),
    # The node's uncorrected ECC count rose during an attempt (nvidia-smi's, in the samples).
    "gpu_ecc": env.float("NODE_WEIGHT_GPU_ECC", default=1.0),
    "node_failure": env.float("NODE_WEIGHT_NODE_FAILURE", default=1.0),
    "hang": env.float("NODE_WEIGHT_HANG", default=0.7),
    "nccl_timeout": env.float("NODE_WEIGHT_NCCL_TIMEOUT", default=0.5),
    "straggler": env.float("NODE_WEIGHT_STRAGGLER", default=0.3),
    # The node failed a job's preflight (its GPUs, or no answer in time): the node's own.
    "preflight": env.float("NODE_WEIGHT_PREFLIGHT", default=1.0),
}
# A signal's weight halves every this many hours, and again with each healthy job the
# node ran since (a factor per job: 0.5 halves it, 1.0 ignores healthy jobs).
NODE_SCORE_HALF_LIFE_HOURS: float = env.float("NODE_SCORE_HALF_LIFE_HOURS", default=72.0)
NODE_HEALTHY_JOB_FACTOR: float = env.float("NODE_HEALTHY_JOB_FACTOR", default=0.5)
# Verdicts: a score at or above these is suspect, bad (3 GPU faults in a day: bad).
NODE_SUSPECT_SCORE: float = env.float("NODE_SUSPECT_SCORE", default=1.0)
NODE_BAD_SCORE: float = env.float("NODE_BAD_SCORE", default=2.5)
# What blames a node is what its jobs print: a bad verdict needs signals from jobs of at
# least this many people, so that no one person's jobs can take a node from everyone.
NODE_BAD_MIN_USERS: int = env.int("NODE_BAD_MIN_USERS", default=2)
# A bad node is left out of submissions for this long, twice as long each time it turns
# bad again within the look-back, at most the maximum.
NODE_AVOID_HOURS: float = env.float("NODE_AVOID_HOURS", default=24.0)
NODE_AVOID_MAX_HOURS: float = env.float("NODE_AVOID_MAX_HOURS", default=24.0 * 14)
NODE_AVOID_LOOKBACK_DAYS: int = env.int("NODE_AVOID_LOOKBACK_DAYS", default=30)
# Preflight (jobs.preflight): how many times one job is submitted again without the nodes
# its preflight found faulty, before it fails saying so.
PREFLIGHT_MAX_RESUBMITS: int = env.int("PREFLIGHT_MAX_RESUBMITS", default=3)
