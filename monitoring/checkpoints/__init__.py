"""The checkpoints each attempt's trainer saved, and which one a resume uses."""
