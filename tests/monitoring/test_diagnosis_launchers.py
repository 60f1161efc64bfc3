"""What launchers add to a log (srun --label, torch's rank prefix, c10d's socket warnings,
srun's task lines) and the distributed failures read through them: each on real output
(its source in a comment) or on the format string that prints it (quoted).

The whole logs of tests/corpus/failures run in test_diagnosis_corpus.py.
"""

import pytest

from jobs.enums import FailureClass, State
from monitoring.diagnosis.diagnose import Diagnosis, diagnose
from tests.corpus.loader import load_failure_cases

ALARMS = [case for case in load_failure_cases() if case.failure_class != "none"]


def _failed(log: str, exit_code: int = 1, state: str = State.FAILED) -> Diagnosis:
    found = diagnose(state=state, exit_code=exit_code, log_tail=log)
    assert found is not None
    return found


def _labelled(log: str, label: str) -> str:
    """Every line as `srun --label` writes it: Slurm's `"%0*d: "` before the task's text."""
    return "\n".join(label + line if line else line for line in log.split("\n"))


@pytest.mark.parametrize("label", ["0: ", "07: "])
@pytest.mark.parametrize("case", ALARMS, ids=lambda c: c.name)
def test_every_real_failure_reads_the_same_under_srun_label(case, label: str) -> None:
    """Frames, warnings and torchrun's failure table under the label are what they are
    without it: the same class, the same evidence line, the same rank."""
    plain = _failed(case.log(), case.exit_code or 0, case.slurm_state)
    found = _failed(_labelled(case.log(), label), case.exit_code or 0, case.slurm_state)
    assert found.failure_class == plain.failure_class == case.failure_class
    assert case.evidence in found.evidence
    assert found.evidence.startswith(label)
    assert found.rank == plain.rank


# vllm-project/vllm#10453: rank 1's NCCL error, one line under torch's rank prefix, below
# its frames; srun's task line as Slurm prints it (`error("%s: %s %s: Exited with exit code
# %d", ...)`).
NCCL_INTERNAL = """\
h100-2:412:412 [0] NCCL INFO group.cc:418 -> 3
h100-2:412:412 [0] NCCL INFO init.cc:1929 -> 3
[rank1]: Traceback (most recent call last):
[rank1]:   File "/vllm-workspace/test.py", line 8, in <module>
[rank1]:     dist.all_reduce(data, op=dist.ReduceOp.SUM)
[rank1]:   File "/usr/local/lib/python3.12/dist-packages/torch/distributed/c10d_logger.py", \
line 83, in wrapper
[rank1]:     return func(*args, **kwargs)
[rank1]:            ^^^^^^^^^^^^^^^^^^^^^
[rank1]:   File "/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py", \
line 2501, in all_reduce
[rank1]:     work = group.allreduce([tensor], opts)
[rank1]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/\
NCCLUtils.hpp:317, internal error - please report this issue to the NCCL developers, NCCL \
version 2.21.5
[rank1]: ncclInternalError: Internal check failed.
[rank1]: Last error:
"""
SRUN_EXIT = "srun: error: h100-2: task 1: Exited with exit code 1\n"


@pytest.mark.parametrize("label", ["", "1: "])
def test_an_nccl_error_on_one_rank_line_is_nccls_not_the_crash_it_ends_in(label: str) -> None:
    found = _failed(_labelled(NCCL_INTERNAL, label) + SRUN_EXIT)
    assert found.failure_class == FailureClass.NCCL_TIMEOUT
    assert found.title == "NCCL error"
    assert found.evidence.startswith(f"{label}[rank1]: torch.distributed.DistBackendError")
    assert "internal error" in found.evidence
    assert found.rank == 1
    assert found.node == "h100-2"
    assert "NCCL_DEBUG" in " ".join(found.fixes)


def test_nccl_network_errors_keep_the_network_explanation() -> None:
    # NVIDIA/nccl#2076's error line: a remote error is the network's, not "NCCL error".
    line = (
        "0: [rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/"
        "distributed/c10d/NCCLUtils.hpp:268, remote process exited or there was a network error"
        ", NCCL version 2.26.2"
    )
    found = _failed(line + "\n")
    assert (found.failure_class, found.title, found.evidence) == (
        FailureClass.NCCL_TIMEOUT,
        "NCCL timeout",
        line,
    )


# icon-lab/SynDiff#21: c10d warns per address it cannot bind, IPv6's errno 97 beside the
# clash, then gives up without an errno.
BIND_WARNINGS = """\
[W socket.cpp:401] [c10d] The server socket cannot be initialized on [::]:6021 (errno: 97 - \
Address family not supported by protocol).
[W socket.cpp:401] [c10d] The server socket has failed to bind to 0.0.0.0:6021 (errno: 98 - \
Address already in use).
[E socket.cpp:435] [c10d] The server socket has failed to listen on any local network address.
"""


@pytest.mark.parametrize("label", ["", "0: ", "[rank0]:"])
def test_a_port_clash_among_socket_warnings_quotes_the_error_not_the_warnings(
    label: str,
) -> None:
    found = _failed(_labelled(BIND_WARNINGS, label))
    assert found.failure_class == FailureClass.ADDRESS_IN_USE
    assert found.evidence == (
        f"{label}[E socket.cpp:435] [c10d] The server socket has failed to listen on any "
        "local network address."
    )
    assert "MASTER_PORT" in " ".join(found.fixes)


def test_a_listen_failure_without_a_taken_port_is_no_port_clash() -> None:
    # The same c10d format strings (`The server socket has failed to bind to {} {}.`) with
    # the address missing from the node, errno 99: no clash to report.
    log = BIND_WARNINGS.replace(
        "98 - Address already in use", "99 - Cannot assign requested address"
    )
    assert _failed(log).failure_class != FailureClass.ADDRESS_IN_USE


@pytest.mark.parametrize(
    "line",
    [
        # hpcaitech/Open-Sora#667, after its errno-110 warnings.
        "[E socket.cpp:753] [c10d] The client socket has failed to connect to any network "
        "address of (6841231, 47389).",
        # lzhxmu/CPPO#6 (torch 2.6's TCPStore client).
        "[E521 15:43:02.707888867 TCPStore.cpp:318] [c10d] TCP client failed to connect/"
        "validate to host 172.18.21.4:37907 - timed out (try=1, timeout=600000ms): The client "
        "socket has timed out after 600000ms while trying to connect to (172.18.21.4, 37907).",
        # OpenRLHF/OpenRLHF#1040, pytorch/pytorch#111805: the store's master gives up.
        "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. "
        "1/3 clients joined.",
        "torch.distributed.DistStoreError: Timed out after 6 seconds waiting for workers. 1/2 "
        "workers joined.",
        # alibaba/Pai-Megatron-Patch#468.
        "torch.distributed.DistStoreError: Socket Timeout",
        # pytorch/pytorch#107021, hpcaitech/ColossalAI#4009: torchrun's agent.
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to "
        "the C10d store has failed. See inner exception for details.",
    ],
)
def test_a_rendezvous_timeout_is_a_distributed_failure(line: str) -> None:
    found = _failed(line + "\n")
    assert found.failure_class == FailureClass.NCCL_TIMEOUT
    assert found.evidence == line
    assert "rendezvous" in found.explanation
    assert any("MASTER_ADDR" in fix for fix in found.fixes)


def test_errno_110_warnings_alone_are_never_the_evidence() -> None:
    # hpcaitech/Open-Sora#667's warnings, the error line cut off: c10d retries these while
    # peers start, so on their own they name no failure.
    warning = (
        "[W socket.cpp:697] [c10d] The client socket has failed to connect to "
        "0.104.99.143:47389 (errno: 110 - Connection timed out)."
    )
    found = _failed(f"{warning}\n{warning}\nKeyError: 'label'\n")
    assert found.failure_class == FailureClass.UNKNOWN
    assert found.evidence == "KeyError: 'label'"


# srun's line for a task killed by a signal: `error("%s: %s %s: %s%s", hosts, task_str,
# tasks, strsignal(sig), core_str)` with core_str " (core dumped)" (src/srun launch); then
# the step's cancel as slurmstepd prints it.
BUS_ERROR = """\
srun: error: gpu07: task 3: Bus error (core dumped)
slurmstepd: error: *** STEP 4242.0 ON gpu07 CANCELLED AT 2025-03-01T10:11:12 ***
"""


@pytest.mark.parametrize(("state", "exit_code"), [(State.FAILED, 135), (State.CANCELLED, 0)])
def test_an_srun_task_dead_of_a_bus_error_is_a_crash_not_a_cancel(
    state: str, exit_code: int
) -> None:
    found = _failed(BUS_ERROR, exit_code, state)
    assert found.failure_class == FailureClass.RANK_CRASH
    assert found.evidence == "srun: error: gpu07: task 3: Bus error (core dumped)"
    assert found.node == "gpu07"
    assert "/dev/shm" in found.explanation
    assert any("num_workers" in fix for fix in found.fixes)


def test_a_bus_error_wins_over_the_nccl_errors_of_its_peers() -> None:
    # The peers of the dead rank then lose it in their collective (NVIDIA/nccl#2076's line).
    peer = (
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/"
        "distributed/c10d/NCCLUtils.hpp:268, remote process exited or there was a network error"
    )
    found = _failed(f"{peer}\n{BUS_ERROR}", 135)
    assert found.failure_class == FailureClass.RANK_CRASH
    assert "Bus error" in found.evidence


def test_a_dataloader_worker_dead_of_a_bus_error_is_a_crash() -> None:
    # hkchengrex/STCN#132, pytorch/pytorch#108861.
    line = (
        "RuntimeError: DataLoader worker (pid 46794) is killed by signal: Bus error. It is "
        "possible that dataloader's workers are out of shared memory. Please try to raise your "
        "shared memory limit."
    )
    found = _failed(line + "\n")
    assert (found.failure_class, found.evidence) == (FailureClass.RANK_CRASH, line)


@pytest.mark.parametrize(
    "hostile",
    [
        "0: " * 21846,
        "0: [rank0]:" * 5958,
        "[W socket.cpp:1] " * 3856,
        "The server socket has failed to listen on any local network address\n" * 948,
        "errno: 98 " * 6554,
        "DistStoreError " * 4370,
        "Bus error " * 6554,
        "NCCL error: " * 5462,
    ],
    ids=lambda s: repr(s[:12]),
)
def test_hostile_launcher_text_is_read_and_bounded(hostile: str) -> None:
    log = hostile[:65536] + "\nRuntimeError: CUDA error: out of memory\n"
    assert _failed(log).failure_class == FailureClass.CUDA_OOM
    alone = _failed(hostile[:65536] + "\n")
    assert len(alone.evidence) <= 500
    assert all(len(line) <= 500 for line in alone.last_lines)
