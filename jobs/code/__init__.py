"""A job's code: snapshots stored once by content hash, and fetched from git."""
