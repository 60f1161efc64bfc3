"""A tiny Keras 3 model (torch backend) fitted with `model.fit`: `python keras_fit.py --verbose 1`.

Keras' own record is the History `fit` returns, saved as history.json.
"""

import argparse
import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "torch")
import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--verbose", type=int, default=1)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--pause", type=float, default=0.1)
options = parser.parse_args()
keras.utils.set_random_seed(0)


class Pace(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(options.pause)


x = np.random.rand(320, 8).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
history = model.fit(
    x,
    y,
    epochs=options.epochs,
    batch_size=16,
    validation_split=0.2,
    verbose=options.verbose,
    callbacks=[Pace()],
)
with open("history.json", "w") as out:
    json.dump(history.history, out)
