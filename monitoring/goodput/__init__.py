"""Where GPU-hours went: each attempt's efficiency card, idle GPUs, goodput per week, its mail."""
