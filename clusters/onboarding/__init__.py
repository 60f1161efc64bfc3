"""Onboarding a cluster: its host key confirmed, then a readiness report in plain words.

`hostscan` fetches and confirms the login node's host key; `report` runs the checks
(`login`, `slurm`, `probe`, `verdicts`) over one SSH connection and a test job per
node; `services` records the cluster and the reports; `tasks` runs a report in Celery.
"""
