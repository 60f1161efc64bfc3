"""Keep one command running under `make run`: start it again when it exits.

honcho, which runs `make run`'s Procfile, has no restart; without this a Celery worker
that exited (a broker restart it did not survive, an out-of-memory kill) left the
portal up with nothing polling, and jobs shown RUNNING with frozen logs. In production
compose's `restart: unless-stopped` does the same. A command that keeps failing is
started again after a pause that doubles up to a limit, and the pause starts over once
it has run for ten seconds: a worker that ran a while and then lost its broker is back
after the first pause (1 s), not after one doubled by an exit a minute before. SIGTERM
and SIGINT go to the command, and then this ends.

Usage: `python -m devtools.supervise [--pause S] -- command args...`
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from types import FrameType

MAX_PAUSE = 30.0
STEADY_AFTER = 10.0  # seconds of running after which a failure is not a crash loop


class Supervisor:
    def __init__(self, command: list[str], pause: float) -> None:
        self.command = command
        self.first_pause = pause
        self.child: subprocess.Popen[bytes] | None = None
        self.stopping = False

    def stop(self, signum: int, _frame: FrameType | None) -> None:
        self.stopping = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def run(self) -> int:
        pause = self.first_pause
        while True:
            started = time.monotonic()
            self.child = subprocess.Popen(self.command)
            code = self.child.wait()
            if self.stopping:
                return 128 - code if code < 0 else code  # killed by a signal: as a shell says
            if time.monotonic() - started >= STEADY_AFTER:
                pause = self.first_pause
            print(
                f"supervise: {self.command[0]} exited with {code}; again in {pause:g} s",
                file=sys.stderr,
                flush=True,
            )
            deadline = time.monotonic() + pause
            while time.monotonic() < deadline and not self.stopping:
                time.sleep(min(0.1, pause))
            if self.stopping:
                return 0
            pause = min(pause * 2, MAX_PAUSE)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pause", type=float, default=1.0, help="first pause before a restart")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to keep running after --")
    supervisor = Supervisor(command, args.pause)
    signal.signal(signal.SIGTERM, supervisor.stop)
    signal.signal(signal.SIGINT, supervisor.stop)
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
