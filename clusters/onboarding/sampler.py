"""The portal's GPU sampler format, as the monitoring app registers it.

The sampler's query fields and its line parser live above the clusters layer
(jobs.rundir, monitoring.reading.gpu); monitoring registers them once the apps
are loaded, as it registers its watchers with the poll, so the readiness check
feeds a node's real `nvidia-smi` output to the very parser the portal uses.
"""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SamplerFormat:
    fields: tuple[str, ...]  # nvidia-smi --query-gpu fields, in order
    parse_line: Callable[[str], object]  # raises ValueError on a line it refuses


_registered: list[SamplerFormat] = []


def sampler_register(sampler: SamplerFormat) -> None:
    _registered[:] = [sampler]


def sampler_format() -> SamplerFormat | None:
    return _registered[0] if _registered else None
