"""A tiny regression trained with Lightning's defaults: `python lightning_fit.py [--tqdm]`.

With `rich` installed (Transformers pulls it in) the default bar is Lightning's Rich bar;
`--tqdm` asks for its TQDM bar. The default logger (TensorBoard, installed) is the record.
"""

import argparse
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--tqdm", action="store_true")
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--pause", type=float, default=0.1)
options = parser.parse_args()
torch.manual_seed(0)


class Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        time.sleep(options.pause)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def data(n: int) -> DataLoader:
    x = torch.randn(n, 8)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16)


bar = TQDMProgressBar() if options.tqdm else RichProgressBar()
trainer = L.Trainer(
    max_epochs=options.epochs, accelerator="cpu", log_every_n_steps=5, callbacks=[bar]
)
trainer.fit(Model(), data(320), data(64))
