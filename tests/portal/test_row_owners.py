"""Each app's rows change only through that app's own code: another app calls its services.

Walks the code: a write (`.update`, `.delete`, `.save` through a manager, `bulk_*`,
`create`, the `portal_lib.bulk` helpers) on a model imported from another app's models
is a failure, named with its file and line. The HTTP layer (`web/`) writes nothing itself.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("accounts", "clusters", "projects", "jobs", "monitoring", "sweeps", "sessions", "web")
WRITES = {
    "update",
    "delete",
    "save",
    "create",
    "get_or_create",
    "update_or_create",
    "bulk_create",
    "bulk_update",
}
BULK_HELPERS = {"bulk_update", "bulk_insert", "insert_rows", "update_rows"}


def _foreign_models(tree: ast.Module, app: str) -> dict[str, str]:
    """Names this module imported from another app's models: name -> owning app."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            owner, _, rest = node.module.partition(".")
            if owner in APPS and owner != app and rest.split(".")[0] == "models":
                for alias in node.names:
                    names[alias.asname or alias.name] = owner
    return names


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _through_manager(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


def foreign_writes(source: str, where: str, app: str) -> list[str]:
    tree = ast.parse(source, where)
    foreign = _foreign_models(tree, app)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        target = None
        if isinstance(func, ast.Attribute) and func.attr in WRITES and _through_manager(func.value):
            target = _root_name(func.value)
        elif isinstance(func, ast.Name) and func.id in BULK_HELPERS and node.args:
            target = _root_name(node.args[0])
        if target in foreign:
            found.append(f"{where}:{node.lineno} writes {foreign[target]}.{target}")
    return found


def app_modules(app: str) -> list[Path]:
    return [p for p in sorted((ROOT / app).rglob("*.py")) if "migrations" not in p.parts]


def test_no_app_writes_another_apps_rows() -> None:
    found = [
        hit
        for app in APPS
        for path in app_modules(app)
        for hit in foreign_writes(path.read_text(), str(path.relative_to(ROOT)), app)
    ]
    assert found == []


def test_the_walk_finds_a_foreign_write() -> None:
    # The check itself: a monitoring module cancelling a jobs row directly is caught.
    source = (
        "from jobs.models import Attempt\n"
        "from monitoring.models import Alert\n"
        "from portal_lib.bulk import bulk_update\n"
        "Attempt.objects.filter(pk=1).update(cancel_requested_at=None)\n"
        "bulk_update(Attempt, [], ['state'])\n"
        "Alert.objects.filter(pk=1).delete()\n"
    )
    assert foreign_writes(source, "monitoring/probe.py", "monitoring") == [
        "monitoring/probe.py:4 writes jobs.Attempt",
        "monitoring/probe.py:5 writes jobs.Attempt",
    ]
