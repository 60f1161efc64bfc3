"""Keep the GPU busy with bf16 matrix products for N seconds; print the rate."""

import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
start = time.perf_counter()
n = 0
while time.perf_counter() - start < seconds:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    n += 20
took = time.perf_counter() - start
print(f"{n} products in {took:.1f} s: {n * 2 * 8192**3 / took / 1e12:.0f} TFLOP/s")
