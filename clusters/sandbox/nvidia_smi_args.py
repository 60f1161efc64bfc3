"""The stand-in nvidia-smi's command line, parsed as the real tool takes it (stdlib only)."""

from __future__ import annotations

from dataclasses import dataclass

USAGE = """NVIDIA System Management Interface -- sandbox stand-in

    nvidia-smi [-L] [-i ID[,ID]] [--query-gpu=FIELDS --format=csv[,noheader][,nounits]]
               [-l SEC | -lms MS]
"""


class UsageError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Options:
    query: list[str] | None = None
    fmt: set[str] | None = None
    ids: list[str] | None = None
    loop_s: float | None = None
    list_gpus: bool = False
    help: bool = False


def parse_args(argv: list[str]) -> Options:
    opts = Options()
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, inline = arg.partition("=")

        def value(name: str = name, eq: str = eq, inline: str = inline) -> str:
            if eq:
                return inline
            if not args:
                raise UsageError(f'Option "{name}" requires a value.', 2)
            return args.pop(0)

        if name in ("--query-gpu",):
            opts.query = [f.strip() for f in value().split(",") if f.strip()]
        elif name in ("--format",):
            opts.fmt = {f.strip() for f in value().split(",") if f.strip()}
        elif name in ("-i", "--id"):
            opts.ids = [i.strip() for i in value().split(",") if i.strip()]
        elif name in ("-l", "--loop"):
            # A bare -l means every 5 seconds, as in the real tool.
            if eq or (args and args[0].isdigit()):
                opts.loop_s = float(value())
            else:
                opts.loop_s = 5.0
        elif name in ("-lms", "--loop-ms"):
            opts.loop_s = float(value()) / 1000
        elif name in ("-L", "--list-gpus"):
            opts.list_gpus = True
        elif name in ("-h", "--help"):
            opts.help = True
        else:
            raise UsageError(
                "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", 2
            )
    return opts
