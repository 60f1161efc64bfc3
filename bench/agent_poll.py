"""One agent call per poll vs one SSH exec per file and per job, on the sandbox cluster.

Run as `.venv/bin/python bench/agent_poll.py` with the sandbox up. Creates N fake run
directories in alice's home, polls them both ways, checks both read the same bytes,
prints a table and removes the directories.
"""

import os
import shlex
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdb import QUICK

from clusters.agent import AgentCommand, AgentRequest, FileRead, run_agent
from clusters.sandbox.config import SSH_HOST, SSH_PORT, Paths
from clusters.slurm import SlurmTools
from clusters.ssh import Connection, Endpoint

ROOT = Path(__file__).resolve().parents[1]
SIZES = (10,) if QUICK else (10, 100, 1000)
NAIVE_BUDGET_S = 60.0  # past this, the naive poll is extrapolated, not run
LOG_BYTES = 4096  # per file; each poll asks for the second half
OFFSET = LOG_BYTES // 2
AGENT_REPEATS = 3


def state_dir() -> Path:
    return Path(os.environ.get("SANDBOX_STATE_DIR", ROOT / ".sandbox"))


def alice_endpoint() -> Endpoint:
    state = state_dir()
    host_key = (state / "ssh/ssh_host_ed25519_key.pub").read_text().split()
    return Endpoint(
        cluster_name="sandbox",
        host=SSH_HOST,
        port=SSH_PORT,
        host_key=" ".join(host_key[:2]),
        username="alice",
        private_key=(state / "keys/alice_ed25519").read_text(),
    )


def make_run_dirs(connection: Connection, base: str, count: int) -> list[str]:
    script = (
        f"umask 077; for i in $(seq 1 {count}); do mkdir -p {base}/$i && "
        f"head -c {LOG_BYTES} /dev/urandom > {base}/$i/stdout.log; done"
    )
    result = connection.run(f"sh -c {shlex.quote(script)}", timeout=300)
    assert result.exit_status == 0, result.error_text
    return [f"{base}/{i}/stdout.log" for i in range(1, count + 1)]


# As the portal runs it: absolute path, clean environment.
SQUEUE = SlurmTools(conf=str(Paths.of(state_dir()).slurm_conf)).wrap(
    ["squeue", "--noheader", "--user=alice"]
)


def agent_poll(connection: Connection, paths: list[str]) -> tuple[float, dict[str, bytes]]:
    request = AgentRequest(
        commands=[AgentCommand("squeue", SQUEUE)],
        files=[FileRead(str(i), path, OFFSET) for i, path in enumerate(paths)],
        max_bytes=64 * 1024 * 1024,
    )
    timings = []
    for _ in range(AGENT_REPEATS):
        started = time.perf_counter()
        reply = run_agent(connection, request)
        timings.append(time.perf_counter() - started)
    assert reply.commands["squeue"].exit == 0, reply.commands["squeue"].stderr
    return statistics.median(timings), {paths[int(k)]: f.data for k, f in reply.files.items()}


def naive_poll(connection: Connection, paths: list[str]) -> tuple[float, dict[str, bytes]]:
    data = {}
    started = time.perf_counter()
    for path in paths:
        data[path] = connection.run(f"tail -c +{OFFSET + 1} {shlex.quote(path)}").stdout
        # One squeue per job, looked up by the attempt's name as a submit retry would.
        name = f"attempt-{uuid.uuid4()}"
        connection.run(f"squeue --noheader --user=alice --name={shlex.quote(name)}")
    return time.perf_counter() - started, data


def main() -> None:
    rows = []
    per_command = None
    with Connection(alice_endpoint()) as connection:
        home = connection.run("pwd").text.strip()
        base = f"{home}/portal-runs/bench-{uuid.uuid4().hex[:8]}"
        try:
            for count in SIZES:
                paths = make_run_dirs(connection, f"{base}/{count}", count)
                agent_s, agent_data = agent_poll(connection, paths)
                assert all(len(agent_data[p]) == LOG_BYTES - OFFSET for p in paths)
                if per_command is not None and per_command * 2 * count > NAIVE_BUDGET_S:
                    naive = f"~{per_command * 2 * count:8.2f}"
                    note = f"naive extrapolated: {per_command * 1000:.1f} ms/command measured"
                else:
                    naive_s, naive_data = naive_poll(connection, paths)
                    assert naive_data == agent_data, "the two ways read different bytes"
                    per_command = naive_s / (2 * count)
                    naive, note = f"{naive_s:9.2f}", "measured"
                rows.append((count, agent_s, naive, note))
        finally:
            connection.run(f"rm -rf {shlex.quote(base)}", timeout=120)

    print(f"files of {LOG_BYTES} B, {LOG_BYTES - OFFSET} B new each; agent: median of 3")
    print(f"{'N':>5} | {'agent s':>8} | agent cmds | {'naive s':>9} | naive cmds | note")
    for count, agent_s, naive, note in rows:
        print(f"{count:>5} | {agent_s:8.3f} | {1:>10} | {naive} | {2 * count:>10} | {note}")


if __name__ == "__main__":
    main()
