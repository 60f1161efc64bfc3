"""Packing a code directory into a deterministic tar.gz, as `submit(code=".")` sends it.

Which files: in a git checkout, what git itself would track (`git ls-files -co
--exclude-standard`: committed, changed and untracked files, not ignored ones);
elsewhere, everything the directory's `.gitignore` files do not exclude
(matched by pathspec, git's own rules); neither takes ALWAYS_SKIPPED's folders
unless committed. The portal packs a session's directory on the cluster by the same
rules (jobs.code.cluster_dir, with git there), so both take the same files. The same
files always give the same bytes (sorted names, zero times and owners, normalised
modes), so the portal stores a directory it has seen once only once. No network, no
portal.
"""

import gzip
import hashlib
import io
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pathspec

# What a directory may hold before it is refused (the sum of its files' sizes).
DEFAULT_MAX_BYTES = 100 * 1024 * 1024
# The uncommitted diff sent along (the portal caps it too).
MAX_DIFF_BYTES = 256 * 1024
LARGEST_SHOWN = 5
# A checkout's history, and what JupyterLab and Python leave beside the code.
ALWAYS_SKIPPED = frozenset({".git", ".ipynb_checkpoints", "__pycache__"})


class PackError(Exception):
    """The directory cannot be packed as it is; the message says what to change."""


@dataclass(frozen=True)
class GitInfo:
    commit: str
    branch: str  # empty on a detached HEAD
    diff: str  # `git diff HEAD`: uncommitted changes to tracked files, capped
    diff_truncated: bool


@dataclass(frozen=True)
class Packed:
    data: bytes  # the tar.gz
    sha256: str
    files: int
    size: int  # the files' bytes, unpacked
    git: GitInfo | None


def _git(directory: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(  # noqa: S603 - fixed argv, no shell
        ["git", "-C", str(directory), *args],  # noqa: S607 - git from PATH, as a user runs it
        capture_output=True,
        check=False,
    )


def _is_git_checkout(directory: Path) -> bool:
    try:
        found = _git(directory, "rev-parse", "--is-inside-work-tree")
    except FileNotFoundError:
        return False  # no git installed: the .gitignore rules still apply
    return found.returncode == 0 and found.stdout.strip() == b"true"


def _git_files(directory: Path) -> list[str]:
    skipped = [f"--exclude={name}" for name in sorted(ALWAYS_SKIPPED)]  # untracked ones
    listed = _git(directory, "ls-files", "-z", "-co", "--exclude-standard", *skipped, "--", ".")
    if listed.returncode != 0:
        raise PackError(f"git ls-files failed in {directory}: {listed.stderr.decode().strip()}")
    # Deleted but uncommitted files are still listed (only what exists is packed), and a
    # submodule as its directory (not packed: its files are another repository's).
    names = {n for n in listed.stdout.decode().split("\0") if n}
    return sorted(
        n for n in names if os.path.islink(directory / n) or os.path.isfile(directory / n)
    )


def _ignore_spec(directory: Path, relative: str) -> pathspec.PathSpec | None:
    ignore = directory / relative / ".gitignore"
    if not ignore.is_file():
        return None
    return pathspec.GitIgnoreSpec.from_lines(ignore.read_text().splitlines())


Rules = list[tuple[str, pathspec.PathSpec]]  # (the .gitignore's directory, its patterns)


def _ignored(path: str, is_dir: bool, rules: Rules) -> bool:
    """Whether any .gitignore above `path` excludes it (a later file wins, as in git)."""
    verdict = False
    for base, spec in rules:
        below = path[len(base) + 1 :] if base else path
        result = spec.check_file(below + ("/" if is_dir else ""))
        if result.include is not None:
            verdict = result.include
    return verdict


def _walked_files(directory: Path) -> list[str]:
    """Files not ignored by any `.gitignore` from the root down to their directory."""
    found: list[str] = []
    rules_of: dict[str, Rules] = {}
    for root, dirs, files in os.walk(directory):
        relative = Path(root).relative_to(directory).as_posix()
        relative = "" if relative == "." else relative
        parent = relative.rsplit("/", 1)[0] if "/" in relative else ""
        rules = list(rules_of.get(parent, [])) if relative else []
        own = _ignore_spec(directory, relative)
        if own is not None:
            rules.append((relative, own))
        rules_of[relative] = rules
        prefix = f"{relative}/" if relative else ""
        kept_dirs = []
        for name in sorted(dirs):
            link = os.path.islink(os.path.join(root, name))
            if name in ALWAYS_SKIPPED or _ignored(prefix + name, not link, rules):
                continue
            if link:
                found.append(prefix + name)  # a link to a directory is packed, never followed
            else:
                kept_dirs.append(name)
        dirs[:] = kept_dirs
        found.extend(prefix + n for n in files if not _ignored(prefix + n, False, rules))
    return sorted(found)


def _git_info(directory: Path) -> GitInfo | None:
    commit = _git(directory, "rev-parse", "--verify", "-q", "HEAD")
    if commit.returncode != 0:
        return None  # a repository without a commit yet
    branch = _git(directory, "symbolic-ref", "--short", "-q", "HEAD")
    diff = _git(directory, "diff", "--no-color", "--no-ext-diff", "HEAD", "--", ".")
    text = diff.stdout
    return GitInfo(
        commit=commit.stdout.decode().strip(),
        branch=branch.stdout.decode().strip() if branch.returncode == 0 else "",
        diff=text[:MAX_DIFF_BYTES].decode("utf-8", errors="replace").replace("\x00", "\ufffd"),
        diff_truncated=len(text) > MAX_DIFF_BYTES,
    )


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def _check_size(directory: Path, names: list[str], max_bytes: int) -> int:
    sizes = {n: (directory / n).lstat().st_size for n in names}
    total = sum(sizes.values())
    if total > max_bytes:
        largest = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))[:LARGEST_SHOWN]
        listed = ", ".join(f"{name} ({_human(size)})" for name, size in largest)
        raise PackError(
            f"{directory} holds {_human(total)} to send, over the cap of {_human(max_bytes)}. "
            f"Largest files: {listed}. Add what the job does not need to .gitignore, "
            "or keep data and checkpoints outside the code directory."
        )
    return total


def _tar_info(directory: Path, name: str) -> tuple[tarfile.TarInfo, bytes | None]:
    path = directory / name
    info = tarfile.TarInfo(name)
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    mode = path.lstat().st_mode
    if path.is_symlink():
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(path)
        info.mode = 0o777
        return info, None
    data = path.read_bytes()
    info.size = len(data)
    info.mode = 0o755 if mode & 0o100 else 0o644
    return info, data


def pack(directory: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES) -> Packed:
    """The directory as a deterministic tar.gz, with its git commit, branch and diff if any."""
    root = Path(directory).resolve()
    if not root.is_dir():
        raise PackError(f"{directory} is not a directory; give the code directory, e.g. '.'")
    in_git = _is_git_checkout(root)
    names = _git_files(root) if in_git else _walked_files(root)
    if not names:
        raise PackError(f"{directory} has no files to send (all ignored, or empty).")
    size = _check_size(root, names, max_bytes)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in names:
            info, data = _tar_info(root, name)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    # mtime=0: gzip's header carries no time, so equal files give equal bytes.
    data = gzip.compress(raw.getvalue(), compresslevel=6, mtime=0)
    return Packed(
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        files=len(names),
        size=size,
        git=_git_info(root) if in_git else None,
    )
