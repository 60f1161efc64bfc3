"""A point as the poll hands it around: (attempt id, series name, x, y), and the series cap."""

# Training-metric series one attempt may have (GPU series are bounded by its allocation).
MAX_SERIES_PER_ATTEMPT = 200

Point = tuple[int, str, float, float]
