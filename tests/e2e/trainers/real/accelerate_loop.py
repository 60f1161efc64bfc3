"""A training loop written with Accelerate, logging through its TensorBoard tracker and
printing a line every few steps: `python accelerate_loop.py`."""

import argparse
import time

import torch
from accelerate import Accelerator

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--pause", type=float, default=0.15)
options = parser.parse_args()
torch.manual_seed(0)

accelerator = Accelerator(cpu=True, log_with="tensorboard", project_dir="logs")
accelerator.init_trackers("loop")
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
model, optimizer = accelerator.prepare(model, optimizer)
for step in range(1, options.steps + 1):
    x = torch.randn(16, 8)
    loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    if step % 5 == 0:
        lr = optimizer.param_groups[0]["lr"]
        accelerator.log({"train_loss": loss.item(), "lr": lr}, step=step)
        accelerator.print(
            f"step {step}/{options.steps} | train_loss {loss.item():.4f} | lr {lr:.4f}"
        )
    time.sleep(options.pause)
accelerator.end_training()
