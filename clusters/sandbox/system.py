"""Host-level preparation: root check, packages, users, keys, files, ports."""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path

from .config import NVIDIA_MAJOR, PORTAL_USER, PORTAL_USER_SHELL, USERS, Paths


class SandboxError(RuntimeError):
    """Something the sandbox cannot fix by itself; the message says what to do."""


PACKAGES = {
    # package -> a file it installs, to tell cheaply whether it is there
    "munge": "/usr/sbin/munged",
    "slurmctld": "/usr/sbin/slurmctld",
    "slurmd": "/usr/sbin/slurmd",
    "slurm-client": "/usr/bin/sinfo",
    "openssh-server": "/usr/sbin/sshd",
    # Closing the portal's services to the tenants (isolation.py).
    "nftables": "/usr/sbin/nft",
    "acl": "/usr/bin/setfacl",
}


def require_root() -> None:
    if os.geteuid() != 0:
        raise SandboxError(
            "The sandbox cluster must be started as root (it creates users and runs "
            "slurmctld, slurmd, munged and sshd). Run it with sudo, e.g. "
            "`sudo .venv/bin/python manage.py sandbox up`."
        )


def run(cmd: list[str], *, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    """Run a command, returning stdout; SandboxError with its output if it fails."""
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"`{' '.join(cmd)}` failed: {exc}") from exc
    if proc.returncode != 0:
        raise SandboxError(
            f"`{' '.join(cmd)}` exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()}"
        )
    return proc.stdout


def ensure_packages() -> None:
    missing = [pkg for pkg, marker in PACKAGES.items() if not Path(marker).exists()]
    if not missing:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    try:
        run(install, env=env, timeout=900)
    except SandboxError:
        # Usually stale or empty package lists; refresh once and retry.
        with contextlib.suppress(SandboxError):
            run(["apt-get", "update"], env=env, timeout=600)
        with contextlib.suppress(SandboxError):
            run(install, env=env, timeout=900)
    still = [pkg for pkg in missing if not Path(PACKAGES[pkg]).exists()]
    if still:
        raise SandboxError(
            f"Could not install {', '.join(still)}. Install by hand as root: "
            f"`apt-get update && apt-get install -y {' '.join(still)}`."
        )


def write_if_changed(path: Path, text: str, mode: int = 0o644) -> bool:
    """Write a file only when its content differs, so `up` can tell what changed."""
    if path.exists() and path.read_text() == text:
        if path.stat().st_mode & 0o7777 != mode:
            path.chmod(mode)
        return False
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)
    return True


def make_dir(path: Path, mode: int, owner: str | None = None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    if owner is not None:
        pw = pwd.getpwnam(owner)
        os.chown(path, pw.pw_uid, pw.pw_gid)


def prepare_tree(paths: Paths) -> None:
    # World-traversable where users' jobs and ssh sessions must read (etc,
    # bin); root-only where secrets live (ssh, keys).
    make_dir(paths.root, 0o755)
    for public in (paths.etc, paths.bin, paths.dev, paths.run, paths.log, paths.spool):
        make_dir(public, 0o755)
    make_dir(paths.ctld_state, 0o700)
    for private in (paths.ssh, paths.keys):
        make_dir(private, 0o700)
    make_dir(paths.munge, 0o755, owner="munge")  # clients need x on the socket's dir
    # sshd refuses to start without its privilege-separation directory.
    make_dir(Path("/run/sshd"), 0o755)


def ensure_munge_key(paths: Paths) -> None:
    if paths.munge_key.exists():
        return
    pw = pwd.getpwnam("munge")
    fd = os.open(paths.munge_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as fh:
        fh.write(os.urandom(1024))
    os.chown(paths.munge_key, pw.pw_uid, pw.pw_gid)


def ensure_gpu_devices(paths: Paths, nodes: tuple[str, ...], per_node: int) -> None:
    """Character devices as GPU files: Slurm sets CUDA_VISIBLE_DEVICES only for those."""
    minor = 0
    for node in nodes:
        for index in range(per_node):
            dev = paths.gpu_device(node, index)
            if not dev.exists():
                try:
                    os.mknod(dev, 0o666 | 0o020000, os.makedev(NVIDIA_MAJOR, minor))
                except OSError:
                    # No mknod (e.g. in some containers): a character device we
                    # may link to works just as well for Slurm's purposes.
                    dev.symlink_to("/dev/null")
            if not dev.is_symlink():
                dev.chmod(0o666)  # mknod's mode is cut by the umask
            minor += 1


def ensure_ssh_key(path: Path, comment: str) -> None:
    if path.exists() and path.with_suffix(".pub").exists():
        return
    for stale in (path, path.with_suffix(".pub")):
        stale.unlink(missing_ok=True)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    path.chmod(0o600)


def ensure_user(name: str, pubkey: str, shell: str = "/bin/bash") -> None:
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        run(["useradd", "--create-home", "--shell", shell, name])
        pw = pwd.getpwnam(name)
    if pw.pw_shell != shell:
        run(["usermod", "--shell", shell, name])
    # useradd leaves the account locked ("!"), which sshd rejects with UsePAM no.
    shadow = Path("/etc/shadow").read_text()
    fields = next(line.split(":") for line in shadow.splitlines() if line.startswith(name + ":"))
    if fields[1] != "*":
        run(["usermod", "-p", "*", name])
    home = Path(pw.pw_dir)
    home.mkdir(exist_ok=True)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    home.chmod(0o700)  # tenants must not read each other's runs
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(exist_ok=True)
    os.chown(ssh_dir, pw.pw_uid, pw.pw_gid)
    ssh_dir.chmod(0o700)
    auth = ssh_dir / "authorized_keys"
    # Keys of earlier state dirs (same comment) are dropped: only the current one logs in.
    comment = pubkey.split()[-1]
    existing = auth.read_text().splitlines() if auth.exists() else []
    kept = [line for line in existing if line.split()[-1:] != [comment]]
    wanted = "\n".join([*kept, pubkey.strip()]) + "\n"
    if not auth.exists() or auth.read_text() != wanted:
        auth.write_text(wanted)
    os.chown(auth, pw.pw_uid, pw.pw_gid)
    auth.chmod(0o600)


def ensure_users(paths: Paths) -> dict[str, str]:
    """Create the tenants (alice, bob, carol) with a key each; returns user -> private key text."""
    keys = {}
    for user in USERS:
        key = paths.user_key(user)
        ensure_ssh_key(key, f"{user}@sandbox")
        ensure_user(user, key.with_suffix(".pub").read_text())
        keys[user] = key.read_text()
    return keys


def ensure_portal_user(paths: Paths) -> str:
    """Create the portal's own login (no job runs as it); returns its private key text."""
    key = paths.user_key(PORTAL_USER)
    ensure_ssh_key(key, f"{PORTAL_USER}@sandbox")
    ensure_user(PORTAL_USER, key.with_suffix(".pub").read_text(), shell=PORTAL_USER_SHELL)
    return key.read_text()


def tenant_keys(paths: Paths) -> tuple[dict[str, str], str]:
    """The tenants' private keys (user -> key text) and the portal account's, as `up` made them."""
    try:
        keys = {user: paths.user_key(user).read_text() for user in USERS}
        return keys, paths.user_key(PORTAL_USER).read_text()
    except FileNotFoundError as exc:
        raise SandboxError(
            f"No key at {exc.filename}: the second cluster's tenants are the sandbox's. "
            "Bring the sandbox up first (`manage.py sandbox up`)."
        ) from exc


def install_nvidia_smi(paths: Paths) -> bool:
    """Copy the stand-in (and its modules) into bin/ with a shebang every user can execute."""
    source = Path(__file__).with_name("nvidia_smi.py").read_text()
    # Root's python may live under /root (pyenv), which alice cannot reach.
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else shutil.which("python3")
    body = source.split("\n", 1)[1] if source.startswith("#!") else source
    changed = False
    # Its modules beside the script: its directory is the first on its import path.
    for module in ("nvidia_smi_args.py", "nvidia_smi_faults.py", "nvidia_smi_summary.py"):
        text = Path(__file__).with_name(module).read_text()
        changed = write_if_changed(paths.bin / module, text, 0o644) or changed
    return write_if_changed(paths.bin / "nvidia-smi", f"#!{python}\n{body}", 0o755) or changed


HOSTS_FILE = Path("/etc/hosts")


def ensure_node_names(nodes: tuple[str, ...], hosts_file: Path = HOSTS_FILE) -> bool:
    """Make the node names resolve to 127.0.0.1, as node names do on a real cluster.

    Batch scripts take MASTER_ADDR from `scontrol show hostnames`, i.e. node names.
    Like the users, this line outlives `down`. True if the file was changed.
    """
    missing = []
    for node in nodes:
        try:
            socket.gethostbyname(node)
        except OSError:
            missing.append(node)
    if not missing:
        return False
    text = hosts_file.read_text() if hosts_file.exists() else ""
    line = f"127.0.0.1 {' '.join(missing)}  # sandbox cluster nodes (clusters.sandbox)\n"
    # Appended in place: /etc/hosts may be a bind mount that a rename would break.
    with hosts_file.open("a") as fh:
        fh.write(("" if not text or text.endswith("\n") else "\n") + line)
    return True


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))  # noqa: S104 - probing, not serving
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def check_port(port: int, what: str) -> None:
    if port_free(port):
        return
    raise SandboxError(
        f"Port {port} (needed by the sandbox's {what}) is already in use by another "
        f"process. Find it with `ss -ltnp 'sport = :{port}'` and stop it, or run "
        "`manage.py sandbox down` if it is a sandbox left from another state dir."
    )
