"""A stand-in trainer that prints as real frameworks do, one after another, for the job page.

Each phase uses the exact shape of a framework's own format string (tests/corpus/metrics):
nanoGPT's iteration line, torchtitan's step line, then a tqdm bar redrawn with `\\r`. The
steps run on from one phase to the next, and the tqdm bar's total is the run's last step.
Run as `python3 frameworks.py STEPS SLEEP [GATE]`; nothing but the standard library. With
GATE, a path, the bar waits for the file GATE.bar before its first step and for GATE.end
before its last, so that a test can watch it live however slowly its browser goes.
"""

import os
import sys
import time

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
third = steps // 3
gate = sys.argv[3] if len(sys.argv) > 3 else ""


def wait_for_gate(name: str) -> None:
    deadline = time.monotonic() + 600  # never hold the job past its limit
    while gate and not os.path.exists(f"{gate}.{name}") and time.monotonic() < deadline:
        time.sleep(0.2)


def loss(step: int) -> float:
    return 10.0 / (1 + 0.1 * step)


# nanoGPT (karpathy/nanoGPT train.py)
for step in range(1, third + 1):
    print(
        f"iter {step}: loss {loss(step):.4f}, time {pause * 1000:.2f}ms, mfu {12 + step / 100:.2f}%"
    )
    sys.stdout.flush()
    time.sleep(pause)

# torchtitan (pytorch/torchtitan torchtitan/components/metrics.py), without its colours
for step in range(third + 1, 2 * third + 1):
    tps = 5800 + step
    print(
        f"[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: {step:2}  "
        f"loss: {loss(step):8.5f}  grad_norm: {1.2345:7.4f}  memory: {9.46:5.2f}GiB({64.99:.2f}%)  "
        f"tps: {tps:,}  tflops: {12.3:,.2f}  mfu: {3.2:.2f}%"
    )
    sys.stdout.flush()
    time.sleep(pause)

# tqdm (tqdm/std.py format_meter: l_bar, bar, r_bar with postfix), redrawn in place
wait_for_gate("bar")
for step in range(2 * third + 1, steps + 1):
    if step == steps:
        wait_for_gate("end")
    percent = 100 * step // steps
    filled = "█" * (percent // 10)
    left = (steps - step) * pause
    sys.stdout.write(
        f"\rtrain: {percent:3d}%|{filled:<10}| {step}/{steps} "
        f"[00:{int(step * pause):02d}<00:{int(left):02d}, {1 / pause:5.2f}it/s, loss={loss(step):.3g}]"
    )
    sys.stdout.flush()
    time.sleep(pause)
print()
print("done", flush=True)
