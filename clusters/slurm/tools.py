"""How a Slurm command is started on a login node: by absolute path, in a clean environment.

A user's PATH, shell functions or rc files must not change what `squeue` or `sacct`
mean, so every Slurm argv built in `commands` goes through `SlurmTools.wrap`:
`/usr/bin/env -i` with a minimal PATH, then the binary by its absolute path. Only
sbatch keeps the session's environment: the job inherits it (`--export=ALL`), and a
submission is its user's own act; its job id is checked as the portal account.
"""

import re
from dataclasses import dataclass

DEFAULT_SLURM_BIN_DIR = "/usr/bin"  # Debian's slurm-client, and the sandbox's
CLEAN_PATH = "/usr/bin:/bin"
ENV = "/usr/bin/env"
# Times in UTC and in Slurm's ISO format, whatever the login node sets.
_FIXED = ("LANG=C.UTF-8", "TZ=UTC", "SLURM_TIME_FORMAT=standard")
_SLURM_COMMANDS = frozenset(
    {
        "sacct",
        "sacctmgr",
        "sbatch",
        "scancel",
        "scontrol",
        "sinfo",
        "sprio",
        "squeue",
        "srun",
        "sshare",
    }
)
_SAFE_PATH = re.compile(r"/[A-Za-z0-9_.+/-]*")


@dataclass(frozen=True)
class SlurmTools:
    """Where a cluster's Slurm binaries and slurm.conf are (Cluster.slurm_bin_dir, slurm_conf)."""

    bin_dir: str = DEFAULT_SLURM_BIN_DIR
    conf: str = ""  # empty: Slurm's built-in default

    def __post_init__(self) -> None:
        for path in (self.bin_dir, *([self.conf] if self.conf else [])):
            if not _SAFE_PATH.fullmatch(path) or "/../" in f"{path}/":
                raise ValueError(f"not a plain absolute path: {path!r}")

    def binary(self, command: str) -> str:
        if command not in _SLURM_COMMANDS:
            raise ValueError(f"not a Slurm command: {command!r}")
        return f"{self.bin_dir.rstrip('/') or ''}/{command}"

    def wrap(self, argv: list[str], *, clean: bool = True) -> list[str]:
        """`argv` (a Slurm command by name, then its arguments) as the cluster must run it."""
        if not argv:
            raise ValueError("an empty Slurm command")
        conf = [f"SLURM_CONF={self.conf}"] if self.conf else []
        env = [ENV, "-i", f"PATH={CLEAN_PATH}", *_FIXED] if clean else [ENV, *_FIXED]
        return [*env, *conf, self.binary(argv[0]), *argv[1:]]


DEFAULT_TOOLS = SlurmTools()
