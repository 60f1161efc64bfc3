"""Reads for the live job page: its header, how each series is charted, failures, hangs,
checkpoints.
"""
