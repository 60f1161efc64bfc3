"""Copied into each run directory as `sitecustomize.py` (the batch script puts the directory on
PYTHONPATH): every Python process of the job installs the portal's stack-dump hook.

It never raises: a job whose Python cannot import the helper runs as before.
Standard library only; Python 3.8 and later.
"""

try:
    import portal_metrics  # type: ignore[import-not-found, unused-ignore]

    portal_metrics.install_stack_dump()
except Exception:  # noqa: S110 - the job must start whatever happens here
    pass
