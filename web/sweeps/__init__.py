"""Sweep pages and the sweeps API."""
