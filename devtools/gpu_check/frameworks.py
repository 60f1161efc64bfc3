"""Train tiny models with real frameworks, so their own output can be read back.

`hf`: Hugging Face Trainer on a small GPT-2 (random weights, random tokens),
logging every 10 steps. `lightning`: a Lightning module with self.log(prog_bar=True),
the default progress bar
(RichProgressBar when rich is installed, as on the H200). Both print exactly what a
researcher's job would print.
"""

import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Tokens(Dataset):
    def __init__(self, n: int, seq: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, 1000, (n, seq), generator=g)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.data[i], "labels": self.data[i]}


def hf(*, bar: bool = True) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    model = GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_layer=4, n_head=4, n_embd=256))
    args = TrainingArguments(
        output_dir="hf-out",
        max_steps=200,
        per_device_train_batch_size=32,
        logging_steps=10,
        learning_rate=5e-4,
        warmup_steps=20,
        bf16=True,
        report_to=[],
        save_strategy="no",
        disable_tqdm=not bar,
    )
    Trainer(model=model, args=args, train_dataset=Tokens(4096, 128)).train()


def lightning(*, tqdm: bool = False) -> None:
    import lightning as L
    from lightning.pytorch.callbacks import TQDMProgressBar

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1)
            )

        def training_step(self, batch, _):  # type: ignore[no-untyped-def]
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(8192, 64, generator=g)
    y = x[:, :1] * 2
    data = DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64)
    bars = [TQDMProgressBar()] if tqdm else []
    L.Trainer(max_epochs=3, accelerator="gpu", devices=1, log_every_n_steps=10, callbacks=bars).fit(
        Module(), data
    )


{
    "hf": hf,
    "hf-plain": lambda: hf(bar=False),
    "lightning": lightning,
    "lightning-tqdm": lambda: lightning(tqdm=True),
}[sys.argv[1]]()
