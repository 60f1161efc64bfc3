"""Every third-party module the portal's own code imports is pinned in the production lock.

The image installs requirements/prod.txt only; a module that only the development lock
brings (httpx once came in through the test tools) would import in the suite and fail
in production.
"""

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = (
    "accounts",
    "clusters",
    "jobs",
    "monitoring",
    "portal",
    "portal_lib",
    "projects",
    "sessions",
    "sweeps",
    "web",
)
# Sent to the cluster and run there by the job's own Python (stdlib only): the agent, and
# the metrics helper and sitecustomize put into each run directory.
NOT_IMPORTED_HERE = {
    ROOT / "clusters" / "agent" / "portal_agent.py",
    ROOT / "monitoring" / "on_cluster" / "portal_metrics.py",
    ROOT / "monitoring" / "on_cluster" / "portal_sitecustomize.py",
    # The sandbox's stand-in nvidia-smi runs on its nodes as a script, its table module
    # beside it (stdlib only, like the agent).
    ROOT / "clusters" / "sandbox" / "nvidia_smi.py",
}


def _imported_roots() -> set[str]:
    roots: set[str] = set()
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if path in NOT_IMPORTED_HERE or "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    roots |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    roots.add(node.module.split(".")[0])
    return roots


def _pinned(lock: Path) -> set[str]:
    names = re.findall(r"^([A-Za-z0-9_.-]+)==", lock.read_text(), re.M)
    return {re.sub(r"[-_.]+", "-", name).lower() for name in names}


def test_every_third_party_import_of_the_apps_is_in_the_production_lock() -> None:
    ours = {*APPS, "devtools"}
    third_party = _imported_roots() - set(sys.stdlib_module_names) - ours - {"__future__"}
    distributions = packages_distributions()
    pinned = _pinned(ROOT / "requirements" / "prod.txt")
    missing = {}
    for module in sorted(third_party):
        names = {re.sub(r"[-_.]+", "-", d).lower() for d in distributions.get(module, [])}
        assert names, f"{module} is imported by the portal but installed by no distribution"
        if not names & pinned:
            missing[module] = sorted(names)
    assert not missing, f"imported by the portal, missing from requirements/prod.txt: {missing}"
