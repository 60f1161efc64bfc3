"""Waiting for Slurm: a cluster's queue, how long jobs like this waited, Slurm's start estimates."""
