"""Files copied into each run directory and run by the job's own Python: stdlib only."""
