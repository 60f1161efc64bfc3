"""The readiness checks read from the test jobs: the shared run directory, Python, GPU sampler."""

from clusters.onboarding.checks import Check, failed, passed
from clusters.onboarding.probe import ProbeOutcome
from clusters.onboarding.sampler import SamplerFormat

RUN_DIR = "Shared run directory"
PYTHON = "Python on the nodes"
SAMPLER = "GPU sampler"
# The portal agent and the helpers a job runs must stay runnable on Python 3.8
# (clusters/agent/portal_agent.py).
MIN_PYTHON = (3, 8)


def _skipped(outcome: ProbeOutcome) -> str:
    return f" (not tested: {', '.join(outcome.skipped)})" if outcome.skipped else ""


def run_dir_check(outcome: ProbeOutcome, base_run_dir: str) -> Check:
    """Every node's test job wrote into the base run directory and the login node read it."""
    if outcome.error:
        return failed(
            RUN_DIR,
            f"no test job could start: {outcome.error}",
            f"Make the base run directory ({base_run_dir}) creatable by the portal's accounts "
            "on a filesystem every node mounts, or set another (`--base-run-dir`, or the "
            "admin's cluster page).",
        )
    if not outcome.nodes:
        return failed(
            RUN_DIR,
            "no node takes jobs, so no test job ran" + _skipped(outcome),
            "Resume the nodes (scontrol update nodename=NODE state=resume) and check again.",
        )
    missing = [probe for probe in outcome.nodes if not probe.wrote]
    if missing:
        said = "; ".join(f"{p.node}: job {p.job_id or '-'} {p.state}" for p in missing)
        refused = [p.node for p in missing if not p.job_id]
        unfinished = [p.node for p in missing if p.state.startswith("still ")]
        fixes = []
        if len(refused) + len(unfinished) < len(missing):
            fixes.append(
                f"Put the base run directory ({base_run_dir}) on a filesystem that the login "
                "node and every compute node mount at the same path (NFS, Lustre, GPFS, "
                "BeeGFS), writable by the users there; `~` means each account's home, which "
                "must then be shared."
            )
        if refused:
            fixes.append(
                f"sbatch refused the test jobs on {', '.join(refused)} (its words above): let "
                "the portal account submit to their partition."
            )
        if unfinished:
            fixes.append(
                f"The test jobs on {', '.join(unfinished)} had not finished when the wait "
                "ended: check again when the nodes have room, or with a longer --wait."
            )
        return failed(
            RUN_DIR,
            f"nothing the test jobs on {', '.join(p.node for p in missing)} wrote into "
            f"{outcome.run_dir} reached the login node ({said})" + _skipped(outcome),
            " ".join(fixes),
        )
    nodes = ", ".join(probe.node for probe in outcome.nodes)
    return passed(
        RUN_DIR,
        f"test jobs on {nodes} wrote into {outcome.run_dir} and the login node read each "
        "file back" + _skipped(outcome),
    )


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split()[0].split("."))
    except (ValueError, IndexError):
        return ()


def python_check(outcome: ProbeOutcome, login_python: str) -> Check:
    """python3 on the login node (the portal agent) and in each node's jobs, 3.8 or later."""
    wanted = ".".join(map(str, MIN_PYTHON))
    found = [f"login node (portal agent): {login_python or 'none'}"]
    bad = [] if _version(login_python) >= MIN_PYTHON else ["the login node"]
    ran = [probe for probe in outcome.nodes if probe.wrote]
    for probe in ran:
        found.append(f"{probe.node}: {probe.python or 'none'}")
        if _version(probe.python) < MIN_PYTHON:
            bad.append(probe.node)
    if not ran:
        bad.append("the nodes (no test job reported back)")
    detail = "; ".join(found)
    if bad:
        return failed(
            PYTHON,
            f"{detail}; python3 {wanted} or later is missing on {', '.join(bad)}",
            f"Install python3 ({wanted} or later) on the login node in /usr/bin or /bin (the "
            "portal agent runs it in a clean environment) and on the compute nodes on the "
            "jobs' PATH.",
        )
    return passed(PYTHON, detail)


def sampler_check(outcome: ProbeOutcome, sampler: SamplerFormat | None) -> Check:
    """Each GPU node's nvidia-smi answered the sampler's query in a form the portal parses."""
    gpu_nodes = [probe for probe in outcome.nodes if probe.wrote and probe.gpus]
    if sampler is None:
        return failed(
            SAMPLER,
            "the portal's GPU sample parser is not loaded in this process",
            "Run the check from the portal (its `monitoring` app registers the parser).",
        )
    if not gpu_nodes:
        return failed(
            SAMPLER,
            "no GPU node's test job reported back, so nvidia-smi was not tried",
            "Fix the checks above (GPUs in gres, the shared run directory), then check again.",
        )
    problems: list[str] = []
    samples = 0
    for probe in gpu_nodes:
        if probe.gpu_exit != "0":
            detail = probe.gpu_exit or "not run"
            lines = "; ".join(probe.gpu_lines)[:200]
            problems.append(
                f"{probe.node}: nvidia-smi exit {detail}" + (f" ({lines})" if lines else "")
            )
            continue
        if not probe.gpu_lines:
            problems.append(f"{probe.node}: nvidia-smi printed no GPU")
            continue
        for line in probe.gpu_lines:
            try:
                sampler.parse_line(line)
            except ValueError as exc:
                problems.append(f"{probe.node}: the portal cannot parse {line[:120]!r} ({exc})")
                break
            samples += 1
    if problems:
        return failed(
            SAMPLER,
            "; ".join(problems),
            "Install NVIDIA's driver utilities (nvidia-smi) on the GPU nodes, on the jobs' "
            "PATH, and make the job's GPUs visible to it (gres.conf's File= device lines).",
        )
    nodes = ", ".join(probe.node for probe in gpu_nodes)
    return passed(
        SAMPLER,
        f"nvidia-smi on {nodes} answered the sampler's query ({samples} GPU samples) and "
        "the portal parsed every line",
    )
