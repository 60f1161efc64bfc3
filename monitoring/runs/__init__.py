"""Runs as experiments: each run's summary row, the runs table, compare, and plans for a bigger
run.
"""
