"""A plain PyTorch loop that prints its progress, no helper, no framework:
`python plain_loop.py`. Its own record is record.jsonl (step, loss, lr)."""

import argparse
import json
import math
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--pause", type=float, default=0.15)
parser.add_argument("--hang-at", type=int, default=0, help="stop stepping there, stay alive")
options = parser.parse_args()
torch.manual_seed(0)

print(f"lr=0.05 batch_size=16 steps={options.steps} seed=0")
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
with open("record.jsonl", "w") as record:
    for step in range(1, options.steps + 1):
        if step == options.hang_at:
            time.sleep(3600)
        x = torch.randn(16, 8)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        lr = 0.05 * 0.5 * (1 + math.cos(math.pi * step / options.steps))
        for group in optimizer.param_groups:
            group["lr"] = lr
        print(f"step {step} loss {loss.item():.4f} lr {lr:.4f}")
        record.write(json.dumps({"step": step, "loss": loss.item(), "lr": lr}) + "\n")
        time.sleep(options.pause)
