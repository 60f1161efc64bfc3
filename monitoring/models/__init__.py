"""Monitoring data: one module per concept, re-exported here for Django."""
