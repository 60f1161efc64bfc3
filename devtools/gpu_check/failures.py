"""Real failures on a real GPU, for the diagnosis rules' inputs (verbatim, as a job prints them).

`oom`: a training step that asks for more memory than the GPU has.
`assert`: an index out of range on the GPU (a device-side assert).
`nan`: a loss that becomes NaN, printed as a trainer prints it.
"""

import sys

import torch


def oom() -> None:
    model = torch.nn.Linear(65536, 65536, device="cuda")  # 16 GiB of weights
    x = torch.randn(262144, 65536, device="cuda")  # 64 GiB of input
    for step in range(1, 4):
        y = model(x)  # the output (64 GiB) and more: past the 141 GiB
        print(f"step {step}, loss={y.float().pow(2).mean().item():.4f}", flush=True)


def device_assert() -> None:
    embedding = torch.nn.Embedding(1000, 64, device="cuda")
    tokens = torch.tensor([1, 2, 5000], device="cuda")
    print(embedding(tokens).sum().item(), flush=True)


def nan() -> None:
    w = torch.tensor([1.0], device="cuda", requires_grad=True)
    opt = torch.optim.SGD([w], lr=1e3)
    for step in range(1, 12):
        loss = (w * 10.0) ** 4
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step}, loss={loss.item():.4f}", flush=True)
        if torch.isnan(loss):
            raise FloatingPointError(f"loss is NaN at step {step}")


{"oom": oom, "assert": device_assert, "nan": nan}[sys.argv[1]]()
