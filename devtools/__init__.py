"""Tools for developing the portal, shared by the tests and the benchmarks (never deployed).

`servers` starts the real servers (daphne, a Celery worker with beat) as child
processes that are always stopped; `keys` makes SSH key pairs; `held_jobs`
fills the sandbox cluster with pending jobs.
"""
