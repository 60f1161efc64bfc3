#!/usr/bin/env python3
"""A small but real PyTorch DDP trainer: an MLP learns a fixed random function.

Run it with torchrun (one process per GPU, any number of nodes):

    torchrun --nnodes=$SLURM_NNODES --nproc_per_node=N --rdzv_backend=c10d \\
        --rdzv_endpoint=$MASTER_ADDR:$MASTER_PORT --rdzv_id=$SLURM_JOB_ID \\
        ddp_train.py --steps 200 --checkpoint-every 50

or alone (`python ddp_train.py`, one process). Uses NCCL when CUDA is
available, else gloo (CPU). Data is synthetic and a pure function of
(seed, rank, step), so a resumed run sees exactly the batches an uninterrupted
one would have seen, and its losses are identical.

Environment (set per attempt by the portal's batch script; flags override):
  PORTAL_CHECKPOINT_DIR  where step-<N>.pt files go (default ./checkpoints)
  PORTAL_RESUME_FROM     checkpoint file to resume from; empty: start fresh. A --lr other
                         than the checkpoint's replaces it (a fork with a new learning rate)
  PORTAL_METRICS_FILE    JSON lines {"step", "loss", "samples", "tokens", "time"} (rank 0)
  PORTAL_PROGRESS_DIR    each rank's heartbeat (portal_metrics.heartbeat, every step);
                         checkpoints are declared pauses (portal_metrics.pause)

Output (rank 0, flushed): `step N, loss=X.XXXX, tokens_per_sec=Y` (a token: one
sample, so that the portal computes MFU from the model size). With a metrics file,
each record also carries `steps_per_sec/<node>`: the pace each
node's slowest rank could keep alone (its compute time per step, waits for the
other ranks excluded), which is how the portal spots a straggling node.
`--throttle-node NODE --throttle-seconds S` slows that node's ranks on purpose
(`--throttle-rank R` instead: the node rank R runs on, wherever Slurm put it);
`--throttle-factor F` makes them also take F times their compute time, as a slower
GPU would, so that they stay behind however loaded the machine (`--throttle-until N`:
only up to step N);
`--checkpoint-pause S` makes every checkpoint take S seconds longer (a declared pause).
SIGUSR1 or SIGTERM (Slurm's --signal warning, or the time limit): checkpoint
after the current step and exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import torch  # type: ignore[import-not-found, unused-ignore]
import torch.distributed as dist  # type: ignore[import-not-found, unused-ignore]
from torch import nn  # type: ignore[import-not-found, unused-ignore]
from torch.nn.parallel import (  # type: ignore[import-not-found, unused-ignore]
    DistributedDataParallel,
)

try:  # the portal's helper, in the run directory (on PYTHONPATH) when the portal runs this
    import portal_metrics  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # run by hand: no heartbeat
    portal_metrics = None

IN_FEATURES = 16
HIDDEN = 64
CHECKPOINT_RE = re.compile(r"^step-(\d+)\.pt$")

_stop_signal: int | None = None


def _on_signal(signum: int, frame: FrameType | None) -> None:
    # Only a flag: the loop checkpoints at the next step boundary, on every rank at once.
    global _stop_signal
    _stop_signal = signum


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description="A small PyTorch DDP trainer on synthetic data.")
    p.add_argument("--steps", type=int, default=100, help="train up to this step (total)")
    p.add_argument("--batch-size", type=int, default=64, help="samples per rank per step")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--warmup", type=int, default=5, help="linear LR warm-up steps")
    p.add_argument("--checkpoint-every", type=int, default=50, help="0: only at the end")
    p.add_argument("--keep", type=int, default=3, help="keep the last K checkpoints")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sleep", type=float, default=0.0, help="seconds per step (to watch a job)")
    p.add_argument("--log-every", type=int, default=1, help="print every N steps")
    p.add_argument("--throttle-node", default="", help="slow this node's ranks (a test knob)")
    p.add_argument("--throttle-rank", type=int, default=None, help="slow the node of this rank")
    p.add_argument("--throttle-seconds", type=float, default=0.0, help="extra seconds per step")
    p.add_argument("--throttle-factor", type=float, default=1.0, help="times its compute time")
    p.add_argument("--throttle-until", type=int, default=0, help="last throttled step (0: all)")
    p.add_argument("--timeout", type=float, default=300, help="collective timeout, seconds")
    p.add_argument(
        "--checkpoint-pause", type=float, default=0.0, help="extra seconds per checkpoint"
    )
    p.add_argument(
        "--checkpoint-dir", default=env("PORTAL_CHECKPOINT_DIR") or "checkpoints", type=Path
    )
    p.add_argument("--resume", default=env("PORTAL_RESUME_FROM") or None, type=Path)
    p.add_argument("--metrics-file", default=env("PORTAL_METRICS_FILE") or None, type=Path)
    args = p.parse_args(argv)
    if args.steps < 0 or args.batch_size < 1 or args.keep < 1 or args.checkpoint_every < 0:
        p.error("--steps >= 0, --batch-size >= 1, --keep >= 1, --checkpoint-every >= 0")
    return args


def init_distributed(timeout: float) -> tuple[str, torch.device]:
    """Process group from torchrun's env (RANK, WORLD_SIZE, MASTER_ADDR/PORT)."""
    cuda = torch.cuda.is_available()
    backend = "nccl" if cuda else "gloo"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    kwargs: dict[str, Any] = {"backend": backend, "timeout": timedelta(seconds=timeout)}
    if "RANK" not in os.environ:  # plain `python ddp_train.py`: a group of one
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        kwargs |= {"init_method": f"tcp://127.0.0.1:{port}", "rank": 0, "world_size": 1}
    dist.init_process_group(**kwargs)
    return backend, device


class Teacher:
    """The function to learn: fixed random weights, the same on every rank."""

    def __init__(self, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.w1 = torch.randn(IN_FEATURES, HIDDEN, generator=g) / IN_FEATURES**0.5
        self.w2 = torch.randn(HIDDEN, 1, generator=g) / HIDDEN**0.5

    def batch(self, seed: int, rank: int, step: int, size: int) -> tuple[Any, Any]:
        # A pure function of (seed, rank, step): no data state to save or restore.
        g = torch.Generator().manual_seed((seed * 1_000_003 + rank) * 1_000_003 + step)
        x = torch.randn(size, IN_FEATURES, generator=g)
        y = torch.sin(x @ self.w1) @ self.w2 + 0.01 * torch.randn(size, 1, generator=g)
        return x, y


def make_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(IN_FEATURES, HIDDEN),
        nn.Tanh(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.Tanh(),
        nn.Linear(HIDDEN, 1),
    )


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def set_learning_rate(optimizer: Any, scheduler: Any, lr: float) -> float:
    """Make `lr` the base learning rate after a resume, keeping the schedule's place; the
    checkpoint's own base comes back (a fork changes --lr and must train with it)."""
    saved = float(scheduler.base_lrs[0])
    if saved != lr:
        scheduler.base_lrs = [lr for _ in scheduler.base_lrs]
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * lr / saved if saved else lr
            group["initial_lr"] = lr
    return saved


def save_checkpoint(directory: Path, step: int, state: dict[str, Any], keep: int) -> Path:
    """Atomically: temp file in the same dir, fsync, rename, fsync the dir; keep the last K."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"step-{step}.pt"
    tmp = directory / f".{final.name}.{os.getpid()}.tmp"
    try:
        with tmp.open("wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    for old in checkpoints(directory)[:-keep]:
        old.unlink(missing_ok=True)
    return final


def checkpoints(directory: Path) -> list[Path]:
    """step-<N>.pt files, oldest step first."""
    found = []
    for path in directory.glob("step-*.pt"):
        match = CHECKPOINT_RE.match(path.name)
        if match:
            found.append((int(match[1]), path))
    return [path for _, path in sorted(found)]


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def node_rates(nodes: list[str], busy: list[float]) -> dict[str, float]:
    """Steps per second each node could keep: its slowest rank's compute time per step."""
    slowest: dict[str, float] = {}
    for node, seconds in zip(nodes, busy, strict=True):
        slowest[node] = max(slowest.get(node, 0.0), seconds)
    return {node: 1.0 / max(seconds, 1e-6) for node, seconds in slowest.items()}


def log(message: str) -> None:
    print(message, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for sig in (signal.SIGUSR1, signal.SIGTERM):
        signal.signal(sig, _on_signal)
    backend, device = init_distributed(args.timeout)
    try:
        return train(args, backend, device)
    finally:
        # Every way out leaves the group, a refused resume too: a process that exits
        # holding it makes torch print C++ stacks (an NCCL group's destructor, a gloo
        # pair's closed socket) below the run's last line.
        if dist.is_initialized():
            dist.destroy_process_group()


def train(args: argparse.Namespace, backend: str, device: torch.device) -> int:
    """The training loop of one rank in the initialised group; its exit code."""
    rank, world = dist.get_rank(), dist.get_world_size()
    lead = rank == 0
    nodes: list[Any] = [None] * world
    dist.all_gather_object(nodes, node_name())
    slow_node = args.throttle_node
    if args.throttle_rank is not None and 0 <= args.throttle_rank < world:
        slow_node = nodes[args.throttle_rank]
    throttled = slow_node == node_name()

    model = make_model(args.seed).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    # Independent of --steps, so a run extended by a resume sees the same schedule.
    scheduler = torch.optim.lr_scheduler.LinearLR(
        optimizer, start_factor=0.1, total_iters=max(args.warmup, 1)
    )
    random.seed(args.seed + rank)
    start = 1
    if args.resume:
        if not args.resume.is_file():
            log(f"rank {rank}: checkpoint to resume from not found: {args.resume}")
            return 2
        # weights_only: a checkpoint is data, never code; CPU first, then the device.
        ckpt = torch.load(args.resume, map_location="cpu", weights_only=True)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        rngs = ckpt.get("rng") or []
        if len(rngs) == world:
            set_rng_state(rngs[rank])
        elif lead:
            log(f"world size changed ({len(rngs)} -> {world}); RNG states not restored")
        start = int(ckpt["step"]) + 1
        saved_lr = set_learning_rate(optimizer, scheduler, args.lr)
        if lead and saved_lr != args.lr:
            log(f"learning rate {saved_lr:g} -> {args.lr:g}: --lr replaces the checkpoint's")
    ddp = DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )
    teacher = Teacher(args.seed)
    loss_fn = nn.MSELoss()

    if lead:
        params = sum(p.numel() for p in model.parameters())
        log(
            f"ddp_train: world_size={world} backend={backend} device={device.type} "
            f"params={params} batch_size={args.batch_size} start_step={start} steps={args.steps}"
        )
        if args.resume:
            log(f"resumed from {args.resume} at step {start - 1}")
        if portal_metrics is not None and hasattr(portal_metrics, "log_params"):
            # The run's settings, as the portal's runs table and compare view show them.
            settings = {k: v for k, v in vars(args).items() if isinstance(v, int | float | str)}
            portal_metrics.log_params(settings, world_size=world)
        # Temp files of a writer that was killed mid-save are garbage.
        for stale in args.checkpoint_dir.glob(".step-*.tmp"):
            stale.unlink(missing_ok=True)
    metrics = args.metrics_file.open("a") if lead and args.metrics_file else None

    def checkpoint(step: int) -> None:
        if portal_metrics is None:
            save(step)
            return
        with portal_metrics.pause("checkpoint"):  # a long save is not a hang
            save(step)

    def save(step: int) -> None:
        # Every rank's RNG state, gathered to rank 0, which alone writes.
        rngs: list[Any] = [None] * world
        dist.all_gather_object(rngs, rng_state())
        if lead:
            state = {
                "step": step,
                "model": model.state_dict(),  # unwrapped: loads without DDP
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "rng": rngs,
                "args": {k: str(v) for k, v in vars(args).items()},
                "world_size": world,
            }
            path = save_checkpoint(args.checkpoint_dir, step, state, args.keep)
            log(f"checkpoint {path.name} saved ({path.stat().st_size} bytes)")
        if args.checkpoint_pause:
            time.sleep(args.checkpoint_pause)

    step = start - 1
    window_start, window_samples = time.monotonic(), 0
    for step in range(start, args.steps + 1):
        step_start = time.monotonic()
        x, y = teacher.batch(args.seed, rank, step, args.batch_size)
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        extra = 0.0
        if throttled and (not args.throttle_until or step <= args.throttle_until):
            computed = time.monotonic() - step_start
            extra = args.throttle_seconds + (args.throttle_factor - 1) * computed
        deadline = time.monotonic() + args.sleep + extra
        while _stop_signal is None and time.monotonic() < deadline:
            time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))
        busy = [0.0] * world
        busy[rank] = time.monotonic() - step_start  # before waiting for the others

        # One collective per step: the mean loss, whether any rank was signalled, and
        # each rank's compute time (its own slot; the sum fills in everyone's).
        stats = torch.tensor(
            [loss.item(), 1.0 if _stop_signal is not None else 0.0, *busy],
            dtype=torch.float64,
            device=device,
        )
        dist.all_reduce(stats)
        mean_loss, stop = stats[0].item() / world, stats[1].item() > 0
        rates = node_rates(nodes, stats[2:].tolist())
        if portal_metrics is not None:
            portal_metrics.heartbeat(step)
        window_samples += args.batch_size * world
        if lead and (step % args.log_every == 0 or step == args.steps or stop):
            elapsed = max(time.monotonic() - window_start, 1e-9)
            # A token here is one sample's input vector: training the MLP on one costs
            # 6 x its parameters in FLOPs, as a transformer's token does, so the portal's
            # MFU (6 x model size x tokens/s over the GPUs' peak) holds for it.
            log(f"step {step}, loss={mean_loss:.4f}, tokens_per_sec={window_samples / elapsed:.1f}")
            window_start, window_samples = time.monotonic(), 0
        if metrics is not None:
            record = {
                "step": step,
                "loss": mean_loss,
                "samples": step * args.batch_size * world,
                "tokens": step * args.batch_size * world,  # one token a sample (see above)
                "time": time.time(),
                **{f"steps_per_sec/{node}": rate for node, rate in rates.items()},
            }
            metrics.write(json.dumps(record) + "\n")
            metrics.flush()
        every = args.checkpoint_every
        if (every and step % every == 0) or step == args.steps or stop:
            checkpoint(step)
        if stop:
            if lead:
                name = signal.Signals(_stop_signal).name if _stop_signal else "a signal"
                log(f"stopping after step {step} on {name} (another rank's or ours)")
            break
    if lead:
        log(f"done at step {step}")
    if metrics is not None:
        metrics.close()
    dist.barrier()  # no rank leaves the group while another still uses it
    return 0


if __name__ == "__main__":
    code = main()
    # Leave without the interpreter's teardown: gloo's worker threads can still hold
    # work there and abort the process (SIGABRT, "terminate called without an active
    # exception") after a run that finished well (pytorch/pytorch#179291 describes it).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
