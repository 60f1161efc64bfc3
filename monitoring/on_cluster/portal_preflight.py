"""The preflight of a multi-node job: copied into each run directory, run by the batch script
before the user's set-up and command (`jobs.scripts`).

`check` runs once per node (srun --ntasks-per-node=1): it reads the node's GPUs from
nvidia-smi (a GPU that does not answer, is missing, has uncorrected ECC errors or pages
waiting to be retired fails it), then joins a small all-reduce across the allocation with a
timeout (torch.distributed where this Python has it, gloo or NCCL; else plain TCP), and
writes `<out>/<node>.json`. `merge` (the batch shell, after the step) writes one JSON object
for the portal, every node of the allocation in it: a node that wrote nothing did not answer
in time. Its exit status says whether every node passed.

Standard library only (torch optional); Python 3.8 and later. Nothing here trusts the job:
it runs before any of the job's own code.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import struct
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

GPU_FIELDS = ("index", "uuid", "ecc.errors.uncorrected.volatile.total", "retired_pages.pending")
BASIC_FIELDS = ("index", "uuid")
NO_VALUE = ("[N/A]", "[Not Supported]", "N/A", "")
REASON_CHARS = 200


def _nvidia_smi(fields: tuple[str, ...], ids: str, timeout: float) -> tuple[int, str]:
    argv = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    if ids:
        argv += ["-i", ids]
    try:
        done = subprocess.run(  # noqa: S603 - a fixed argv, no shell
            argv, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        return 127, "nvidia-smi not found"
    except subprocess.TimeoutExpired:
        return 124, f"nvidia-smi did not answer within {timeout:.0f} s"
    return done.returncode, (done.stdout or "") + (done.stderr or "")


def gpu_faults(output: str, fields: tuple[str, ...], expected: int) -> list[str]:
    """What is wrong with the GPUs nvidia-smi listed (its query output); [] when nothing."""
    rows = [[cell.strip() for cell in line.split(",")] for line in output.splitlines() if line]
    faults = []
    if len(rows) < expected:
        faults.append(f"{len(rows)} of {expected} GPUs answer")
    for row in rows:
        values = dict(zip(fields, row, strict=False))
        gpu = f"GPU {values.get('index', '?')}"
        errors = values.get("ecc.errors.uncorrected.volatile.total", "")
        if errors not in NO_VALUE and errors.isdigit() and int(errors) > 0:
            faults.append(f"{gpu}: {errors} uncorrected ECC errors")
        if values.get("retired_pages.pending", "") == "Yes":
            faults.append(f"{gpu}: pages waiting to be retired (reset the GPU)")
    return faults


def gpu_check(ids: str, expected: int, timeout: float) -> dict[str, Any]:
    if expected == 0:
        return {"ok": True, "reason": "no GPUs asked for"}
    fields: tuple[str, ...] = GPU_FIELDS
    code, output = _nvidia_smi(fields, ids, timeout)
    if code == 2:  # an older driver that knows no fault fields: the GPUs answer at least
        fields = BASIC_FIELDS
        code, output = _nvidia_smi(fields, ids, timeout)
    if code != 0:
        first = output.strip().splitlines()[:1]
        return {"ok": False, "reason": f"nvidia-smi failed ({code}): {' '.join(first)}"}
    faults = gpu_faults(output, fields, expected)
    return {"ok": not faults, "reason": "; ".join(faults)}


def _exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            raise ConnectionError("peer closed")
        data += more
    return data


def tcp_all_reduce(addr: str, port: int, rank: int, world: int, timeout: float) -> int:
    """The sum of every rank's 1 over plain TCP: rank 0 gathers and answers each."""
    deadline = time.monotonic() + timeout
    if rank == 0:
        with socket.create_server(("", port), reuse_port=False) as server:
            server.settimeout(timeout)
            peers = []
            try:
                for _ in range(world - 1):
                    server.settimeout(max(deadline - time.monotonic(), 0.1))
                    peer, _ = server.accept()
                    peers.append(peer)
                total = 1 + sum(struct.unpack("!i", _exact(p, 4))[0] for p in peers)
                for peer in peers:
                    peer.sendall(struct.pack("!i", total))
            finally:
                for peer in peers:
                    peer.close()
            return total
    while True:
        try:
            sock = socket.create_connection((addr, port), timeout=1.0)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    with sock:
        sock.settimeout(max(deadline - time.monotonic(), 0.1))
        sock.sendall(struct.pack("!i", 1))
        return int(struct.unpack("!i", _exact(sock, 4))[0])


def _torch() -> tuple[Any, Any] | None:
    """torch and torch.distributed where this Python has them; None without (or broken).

    Looked up when the check runs, not at import: `merge` needs no torch, and torch is
    the job's optional library, no part of the portal."""
    try:
        return importlib.import_module("torch"), importlib.import_module("torch.distributed")
    except Exception:  # no torch here, or one that does not import: the plain TCP check
        return None


def _torch_all_reduce(
    torch: Any, dist: Any, addr: str, port: int, rank: int, world: int, timeout: float
) -> str:
    nccl = torch.cuda.is_available() and dist.is_nccl_available()
    backend = "nccl" if nccl else "gloo"
    dist.init_process_group(
        backend,
        init_method=f"tcp://{addr}:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=timeout),
    )
    try:
        value = torch.ones(1, device="cuda" if nccl else "cpu")
        dist.all_reduce(value)
        if int(value.item()) != world:
            raise RuntimeError(f"all_reduce gave {int(value.item())}, not {world}")
    finally:
        dist.destroy_process_group()
    return backend


def collective_check(addr: str, port: int, rank: int, world: int, timeout: float) -> dict[str, Any]:
    found = _torch()
    try:
        if found is not None:
            backend = _torch_all_reduce(*found, addr, port, rank, world, timeout)
        else:
            backend = "tcp"
            total = tcp_all_reduce(addr, port, rank, world, timeout)
            if total != world:
                raise RuntimeError(f"all_reduce gave {total}, not {world}")
    except Exception as exc:  # whatever fails is the check's answer
        text = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return {"ok": False, "reason": f"all_reduce of {world} nodes failed: {text}"}
    return {"ok": True, "reason": "", "backend": backend}


def _bounded(part: dict[str, Any]) -> dict[str, Any]:
    return {k: v[:REASON_CHARS] if isinstance(v, str) else v for k, v in part.items()}


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def check(out: str, port: int, timeout: float) -> int:
    env = os.environ
    node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    started = time.monotonic()
    ids = env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS") or ""
    expected = int(env.get("PORTAL_PREFLIGHT_GPUS", "0") or 0)
    gpu = gpu_check(ids, expected, timeout / 3)
    collective = collective_check(
        env.get("MASTER_ADDR", "127.0.0.1"),
        port,
        int(env.get("SLURM_PROCID", "0")),
        int(env.get("SLURM_NTASKS", "1")),
        timeout / 2,
    )
    result = {
        "node": node,
        "ok": bool(gpu["ok"] and collective["ok"]),
        "gpu": _bounded(gpu),
        "collective": _bounded(collective),
        "seconds": round(time.monotonic() - started, 2),
    }
    _write(os.path.join(out, f"{node}.json"), result)
    return 0 if result["ok"] else 1


def merge(out: str, nodes: list[str], timeout: float) -> dict[str, Any]:
    """Every node's result; a node without one did not answer within the timeout."""
    results: dict[str, Any] = {}
    for node in nodes:
        try:
            with open(os.path.join(out, f"{node}.json")) as fh:
                results[node] = json.load(fh)
        except (OSError, ValueError):
            results[node] = {"node": node, "ok": False, "missing": True}
            results[node]["reason"] = f"no answer within {timeout:.0f} s"
    return {"ok": all(r.get("ok") is True for r in results.values()), "nodes": results}


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] not in ("check", "merge"):
        sys.stderr.write("usage: portal_preflight.py check OUT PORT TIMEOUT\n")
        sys.stderr.write("       portal_preflight.py merge OUT TIMEOUT NODE,NODE,...\n")
        return 2
    if argv[0] == "check":
        return check(argv[1], int(argv[2]), float(argv[3]))
    nodes = [n for n in argv[3].split(",") if n]
    merged = merge(argv[1], nodes, float(argv[2]))
    sys.stdout.write(json.dumps(merged) + "\n")
    return 0 if merged["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
