"""The docs as a map: every path they name exists, and no test run writes into docs/."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# `code spans` and [links](targets) that look like a repository path.
CODE = re.compile(r"`([^`\s]+)`")
LINK = re.compile(r"\]\(([^)\s#]+)")
PATHLIKE = re.compile(r"^[\w.-]+(/[\w.*-]+)+/?$")
# Made by the first install or only on the cluster, not in a fresh clone.
NOT_IN_A_CLONE = (".venv/", "portal-examples/", "test-artifacts/")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def named_paths(text: str) -> set[str]:
    found = set()
    for match in [*CODE.findall(text), *LINK.findall(text)]:
        name = match.rstrip(".,:;")
        if "://" in name or name.startswith(("/", "<")) or not PATHLIKE.match(name):
            continue
        if name.startswith(NOT_IN_A_CLONE):
            continue
        found.add(name)
    return found


def missing_paths(text: str, doc: Path) -> list[str]:
    missing = []
    for name in sorted(named_paths(text)):
        # From the repository's root, or from the doc's own folder (a link beside it).
        bases = (ROOT, doc.parent)
        if not any(next(base.glob(name), None) is not None for base in bases):
            missing.append(name)
    return missing


APPS = (
    "portal",
    "web",
    "sweeps",
    "sessions",
    "monitoring",
    "jobs",
    "projects",
    "clusters",
    "accounts",
)
DOTTED = re.compile(r"`((?:" + "|".join(APPS) + r")(?:\.\w+)+)(?![\w(])")  # not a call


def unresolved_names(text: str) -> list[str]:
    """Dotted names (`jobs.poll.cycle._poll_files`) whose module or first attribute is gone."""
    gone = []
    for name in sorted(set(DOTTED.findall(text))):
        parts = name.split(".")
        module = None
        for end in range(len(parts), 0, -1):
            base = ROOT.joinpath(*parts[:end])
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.exists():
                    module, rest = candidate, parts[end:]
                    break
            if module:
                break
        if module is None or (
            rest
            and not re.search(rf"^\s*(def|class|async def)? *{rest[0]}\b", module.read_text(), re.M)
        ):
            gone.append(name)
    return gone


def test_every_module_and_name_the_docs_give_exists() -> None:
    gone = {
        str(doc.relative_to(ROOT)): names
        for doc in doc_files()
        if (names := unresolved_names(doc.read_text()))
    }
    assert gone == {}


def test_a_stale_module_name_is_caught() -> None:
    text = (
        "`jobs.polling._poll_files`, `jobs.poll.cycle._poll_files`, `jobs.poll.cycle.nothing_here`"
    )
    assert unresolved_names(text) == ["jobs.poll.cycle.nothing_here", "jobs.polling._poll_files"]


def test_every_path_the_docs_name_exists() -> None:
    missing = {
        str(doc.relative_to(ROOT)): gone
        for doc in doc_files()
        if (gone := missing_paths(doc.read_text(), doc))
    }
    assert missing == {}


def test_a_moved_module_named_in_the_docs_is_caught() -> None:
    text = (
        "The reader (`monitoring/reader.py`) and [the poll](jobs/polling.py) and `bench/poll.py`."
    )
    assert missing_paths(text, ROOT / "README.md") == ["jobs/polling.py", "monitoring/reader.py"]


def test_the_readme_is_a_manual_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 180
    assert "make run" in readme and "make test" in readme


def _tests_calling_for_docs() -> set[str]:
    out = subprocess.run(
        ["git", "grep", "-l", "for_docs(", "--", "tests/*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line for line in out.splitlines()} - {"tests/helpers.py", "tests/portal/test_docs.py"}


def test_make_screenshots_runs_every_test_that_takes_a_docs_picture() -> None:
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^SCREENSHOT_TESTS = (.*?)\n\n", makefile, re.M | re.S)
    assert listed is not None
    assert set(listed.group(1).replace("\\", " ").split()) == _tests_calling_for_docs()


def test_no_test_writes_into_docs() -> None:
    # A run must leave the tracked tree as it found it: pictures go to test-artifacts/docs.
    out = subprocess.run(
        ["git", "grep", "-n", "-F", 'ROOT / "docs"', "--", "tests/*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout
    writes = [line for line in out.splitlines() if "test_docs.py" not in line]
    assert writes == []
