"""MFU of a real model: GPT-2 124M (Hugging Face, random weights), bf16 autocast, AdamW.

Prints JSON lines a researcher's trainer would ({"step", "loss", "tokens_per_sec"}),
then the model FLOPs per token by the 6N rule (what the portal computes from N) and
by PyTorch's FLOP counter over one whole training step, and the MFU each gives
against the H200's dense BF16 peak (989 TFLOP/s).
"""

import json
import time

import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import GPT2Config, GPT2LMHeadModel

PEAK = 989e12
BATCH, SEQ, STEPS = 16, 1024, 40
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_positions=SEQ)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
params = sum(p.numel() for p in model.parameters())
non_embedding = params - model.transformer.wte.weight.numel() - model.transformer.wpe.weight.numel()


def batch(step: int) -> torch.Tensor:
    g = torch.Generator(device="cuda").manual_seed(step)
    return torch.randint(0, 50257, (BATCH, SEQ), device="cuda", generator=g)


def train_step(step: int) -> float:
    x = batch(step)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x, labels=x).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


with FlopCounterMode(display=False) as counter:
    train_step(0)
counted_per_token = counter.get_total_flops() / (BATCH * SEQ)

for step in range(1, 6):  # warm-up
    train_step(step)
torch.cuda.synchronize()
start = time.perf_counter()
tokens_per_sec = 0.0
for step in range(6, 6 + STEPS):
    t0 = time.perf_counter()
    loss = train_step(step)
    value = loss.item()  # synchronises
    tokens_per_sec = BATCH * SEQ / (time.perf_counter() - t0)
    print(
        json.dumps({"step": step, "loss": round(value, 4), "tokens_per_sec": round(tokens_per_sec)})
    )
took = time.perf_counter() - start
rate = STEPS * BATCH * SEQ / took
result = {
    "params": params,
    "non_embedding_params": non_embedding,
    "tokens_per_sec": rate,
    "flops_per_token_6n": 6 * params,
    "flops_per_token_counted": counted_per_token,
    "mfu_6n": rate * 6 * params / PEAK,
    "mfu_counted": rate * counted_per_token / PEAK,
    "gpu": torch.cuda.get_device_name(),
}
print("RESULT " + json.dumps(result))
