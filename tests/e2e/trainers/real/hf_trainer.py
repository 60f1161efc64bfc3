"""A tiny causal LM trained by the Hugging Face Trainer the way its docs show: defaults.

`python hf_trainer.py [--no-bars] [--save-steps N]`. Built from a config (nothing
downloaded); it ends as the library's example scripts do, and the Trainer's own record of what it logged is
out/trainer_state.json. A callback paces the steps so that the run lasts long enough to be watched live.
"""

import argparse
import time

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=120)
parser.add_argument("--pause", type=float, default=0.15)
parser.add_argument("--no-bars", action="store_true")
parser.add_argument("--save-steps", type=int, default=0, help="0: the library's default")
options = parser.parse_args()
torch.manual_seed(0)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.ids = torch.randint(0, 64, (n, 16))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Pace(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(options.pause)


config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=1, n_head=2)
args = TrainingArguments(
    output_dir="out",
    max_steps=options.steps,
    per_device_train_batch_size=8,
    logging_steps=5,
    eval_strategy="steps",
    eval_steps=40,
    learning_rate=5e-4,
    use_cpu=True,
    disable_tqdm=options.no_bars,
    **({"save_steps": options.save_steps} if options.save_steps else {}),
)
trainer = Trainer(
    model=GPT2LMHeadModel(config),
    args=args,
    train_dataset=Tokens(240),
    eval_dataset=Tokens(32),
    callbacks=[Pace()],
)
result = trainer.train()
# As the library's example scripts end: the metrics printed and saved, the state kept.
trainer.log_metrics("train", result.metrics)
trainer.save_metrics("train", result.metrics)
trainer.save_state()
