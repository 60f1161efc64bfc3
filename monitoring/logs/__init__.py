"""Log bytes by offset: stored once, read by range, bounded in size."""
