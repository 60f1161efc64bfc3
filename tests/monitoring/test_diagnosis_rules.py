"""The widened rules, each on real text (its source in a comment), and the no-false-alarm cases.

The logs of tests/corpus/failures run whole in test_diagnosis_corpus.py; here each rule
meets the wordings it must read, and the lines it must not quote.
"""

import pytest

from jobs.enums import FailureClass, State
from monitoring.diagnosis.diagnose import Diagnosis, diagnose
from monitoring.diagnosis.log_scan import LAST_LINES


def _failed(log: str, exit_code: int = 1, state: str = State.FAILED) -> Diagnosis:
    found = diagnose(state=state, exit_code=exit_code, log_tail=log)
    assert found is not None
    return found


# NVIDIA/nccl#795, NVIDIA/nccl-tests#166, sgl-project/sglang#3820, rwth-i6/returnn#1470,
# NVIDIA/nccl#2076 (the `Last error:` line): NCCL's own wordings of an errno.
@pytest.mark.parametrize(
    "line",
    [
        "a100-st-p4d24xlarge-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to "
        "recv from 10.200.84.247<58355> failed : Broken pipe",
        "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
        "10.0.0.2<45763> failed : Software caused connection abort",
        "node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to "
        "10.0.0.4<56849> returned 113(No route to host) errno 115(Operation now in progress)",
        "nd20-01:275975:275975 [0] misc/socket.cc:379 NCCL WARN Call to bind failed : Cannot "
        "assign requested address",
    ],
)
def test_nccl_with_any_network_errno_phrase_is_an_nccl_failure(line: str) -> None:
    found = _failed(line + "\n")
    assert found.failure_class == FailureClass.NCCL_TIMEOUT
    assert found.evidence == line


def test_an_errno_phrase_under_a_c10d_frame_is_an_nccl_failure_without_it_none() -> None:
    # pytorch/pytorch#74146: init_process_group's rendezvous lost its peer.
    log = (
        "Traceback (most recent call last):\n"
        '  File "/root/miniconda3/envs/vision/lib/python3.9/site-packages/torch/distributed/'
        'distributed_c10d.py", line 611, in init_process_group\n'
        "    default_pg._set_sequence_number_for_group()\n"
        "RuntimeError: Connection reset by peer\n"
    )
    found = _failed(log)
    assert found.failure_class == FailureClass.NCCL_TIMEOUT
    assert found.evidence == "RuntimeError: Connection reset by peer"
    # The same phrase from a download, far from any distributed context, is not NCCL's.
    plain = _failed("RuntimeError: Connection reset by peer\n")
    assert plain.failure_class == FailureClass.UNKNOWN


# pytorch/pytorch#16417, Cadene/vqa.pytorch#47, DenseMatchingBenchmark#20, BestSonny/SSTD#9,
# antgroup/echomimic_v2#115, kijai/ComfyUI-WanVideoWrapper#565: CUDA OOM in every wording.
@pytest.mark.parametrize(
    "line",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.22 GiB. GPU 0 has a "
        "total capacity of 15.69 GiB of which 3.71 GiB is free.",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB.",
        "THCudaCheck FAIL file=/opt/conda/conda-bld/pytorch_1513368888240/work/torch/lib/THC/"
        "generic/THCStorage.c line=82 error=2 : out of memory",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "F1206 10:15:04.766489   447 syncedmem.cpp:56] Check failed: error == cudaSuccess "
        "(2 vs. 0)  out of memory",
        "RuntimeError: CUDA error: out of memory",
    ],
)
def test_cuda_oom_in_every_wording(line: str) -> None:
    # The segfault or abort that follows an OOM is its consequence, not a crash to blame.
    found = _failed(line + "\nSegmentation fault (core dumped)\n", exit_code=139)
    assert found.failure_class == FailureClass.CUDA_OOM
    assert found.evidence == line


# marbl/canu#1052 and #1067, DataBiosphere/toil#4706, GEMmaker#242, ARCHER2 docs,
# HAFS#101, snakemake-executor-plugin-slurm#371, jmonlong/PopSV#7.
@pytest.mark.parametrize(
    ("line", "state", "expected"),
    [
        (
            "slurmstepd: *** JOB 830329 CANCELLED AT 2018-08-06T17:21:44 DUE TO TIME LIMIT on "
            "n447 ***",
            State.FAILED,
            FailureClass.TIME_LIMIT,
        ),
        (
            "slurmstepd-phoenix-07: error: *** JOB 1449736 ON phoenix-07 CANCELLED AT "
            "2023-12-03T12:47:09 DUE TO TIME LIMIT ***",
            State.FAILED,
            FailureClass.TIME_LIMIT,
        ),
        (
            "slurmstepd: error: *** JOB 32391783 ON cn119 CANCELLED AT 2021-06-18T13:05:36 DUE "
            "TO PREEMPTION ***",
            State.FAILED,
            FailureClass.PREEMPTION,
        ),
        (
            "slurmstepd: error: *** STEP 1.0 ON nid001520 CANCELLED AT 2024-10-23T20:04:10 DUE "
            "TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
            State.FAILED,
            FailureClass.NODE_FAILURE,
        ),
        (
            "slurmstepd: error: Detected 1 oom-kill event(s) in step 3495064.0 cgroup.",
            State.FAILED,
            FailureClass.HOST_OOM,
        ),
        (
            "slurmstepd: error: Detected 2 oom_kill events in StepId=JOBID.13. Some of the step "
            "tasks have been OOM Killed.",
            State.FAILED,
            FailureClass.HOST_OOM,
        ),
        (
            "slurmstepd: error: Job 42664148 exceeded memory limit (10889240 > 4194304), being "
            "killed",
            State.CANCELLED,  # jobacct_gather's kill reads CANCELLED in sacct
            FailureClass.HOST_OOM,
        ),
    ],
)
def test_slurm_messages_across_versions(line: str, state: str, expected: str) -> None:
    found = _failed(line + "\n", exit_code=0, state=state)
    assert found.failure_class == expected
    assert found.evidence == line


def test_a_reasonless_cancel_quotes_the_jobs_line() -> None:
    # qiskit-community/spank-plugins#17: the step's line, then the job's.
    log = (
        "slurmstepd: error: *** STEP 3.0 ON c1 CANCELLED AT 2025-02-13T15:47:35 ***\n"
        "slurmstepd: error: *** JOB 3 ON c1 CANCELLED AT 2025-02-13T15:47:35 ***\n"
    )
    found = _failed(log, exit_code=0, state=State.CANCELLED)
    assert found.failure_class == FailureClass.CANCELLED
    assert found.evidence.startswith("slurmstepd: error: *** JOB 3 ON c1")


def test_no_module_named_also_from_python_m() -> None:
    # myc634/UltraLiDAR_nusc_waymo#1: `python -m torch.distributed.launch` under sudo.
    found = _failed("/usr/bin/python: No module named torch.distributed\n")
    assert found.failure_class == FailureClass.MISSING_MODULE
    # meta-llama/llama#843: the child's error wins over torchrun's report after it.
    log = (
        "ModuleNotFoundError: No module named 'fire'\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 "
        "(pid: 2798750) of binary: /usr/bin/python3\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    )
    child = _failed(log)
    assert child.failure_class == FailureClass.MISSING_MODULE
    assert child.evidence == "ModuleNotFoundError: No module named 'fire'"
    assert child.local_rank == 0 and child.rank == 0  # one node: the local rank is the rank
    on_two = diagnose(state=State.FAILED, exit_code=1, log_tail=log, node_list=["n1", "n2"])
    assert on_two is not None and (on_two.rank, on_two.local_rank) == (None, 0)


# NVIDIA/open-gpu-kernel-modules#1150, Bumblebee-Project/Bumblebee#677, NVIDIA/NVSentinel#155,
# jade-hpc-gpu#194, NVIDIA/semantic-segmentation#33, nv-tlabs/3dgrut#191, pytorch#152780.
@pytest.mark.parametrize(
    "line",
    [
        "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused "
        "by previous Xid 149",
        "[24128.828315] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000",
        "NVRM: fallen off the bus and is not responding to commands.",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at "
        "/pytorch/aten/src/THC/THCCachingHostAllocator.cpp:265",
        "  what():  CUDA error: unknown error",
        "[rank0]:[E504 22:44:08.389636235 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID "
        "0(default_pg) Rank 0] Process group watchdog thread terminated with exception: CUDA "
        "error: an illegal memory access was encountered",
    ],
)
def test_gpu_hardware_faults_make_the_node_suspect(line: str) -> None:
    found = diagnose(state=State.FAILED, exit_code=134, log_tail=line + "\n", node_list=["gpu07"])
    assert found is not None
    assert found.failure_class == FailureClass.GPU_HARDWARE
    assert found.evidence == line.strip()
    assert found.node == "gpu07"  # a single-node attempt: its node
    assert "node is suspect" in found.explanation
    assert any("exclude" in fix.lower() for fix in found.fixes)


def test_a_gpu_fault_in_a_node_failure_is_the_gpus() -> None:
    found = _failed(
        "NVRM: fallen off the bus and is not responding to commands.\n",
        exit_code=0,
        state=State.NODE_FAIL,
    )
    assert found.failure_class == FailureClass.GPU_HARDWARE


def test_the_earliest_entry_of_the_failure_tables_is_blamed() -> None:
    # torchrun's table as lzhxmu/CPPO#6 shows it, with a second node's table whose root
    # cause failed earlier (multi-node: every agent prints its own).
    table = (
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  time      : {time}\n"
        "  host      : {host}\n"
        "  rank      : {rank} (local_rank: 0)\n"
        "  exitcode  : {code} (pid: 14750)\n"
        "  error_file: <N/A>\n"
    )
    log = (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        + table.format(time="2025-05-21_15:43:09", host="gpu02", rank=8, code=1)
        + "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        + table.format(time="2025-05-21_15:43:03", host="gpu01", rank=3, code=-9)
    )
    found = _failed(log)
    assert found.failure_class == FailureClass.RANK_CRASH
    assert (found.rank, found.node, found.failed_at) == (3, "gpu01", "2025-05-21_15:43:03")
    assert found.evidence == "exitcode  : -9 (pid: 14750)"
    assert "First to fail: rank 3 on node gpu01 (killed by SIGKILL)." in found.explanation
    assert "2025-05-21_15:43:03" in found.explanation


def test_evidence_is_never_a_stack_frame() -> None:
    # DeepMotionAIResearch/DenseMatchingBenchmark#20: the frames repeat the error's words.
    log = (
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
        "\nframe #3: at::cuda::getCurrentCUDABlasHandle() + 0x62 (0x7f3c in CUBLAS_STATUS_ALLOC"
        "_FAILED libtorch_cuda.so)\n"
    )
    frames_only = "frame #3: c10::Error CUDA error: out of memory + 0x62 (0x7f3c in libc10.so)\n"
    assert _failed(log).evidence.startswith("RuntimeError: CUDA error: CUBLAS")
    unknown = _failed(frames_only + "0x00007f3c in raise () from /lib/libc.so.6\n")
    assert unknown.failure_class == FailureClass.UNKNOWN
    assert unknown.evidence == ""


def test_a_warning_that_quotes_an_exception_raises_no_alarm() -> None:
    # AUTOMATIC1111/stable-diffusion-webui#11343: torchvision's warning quotes ENOENT.
    warning = (
        "/venv/lib/python3.10/site-packages/torchvision/io/image.py:13: UserWarning: Failed to "
        "load image Python extension: 'libc10_hip.so: cannot open shared object file: No such "
        "file or directory'\n"
        "  warn(\n"
    )
    assert diagnose(state=State.COMPLETED, exit_code=0, log_tail=warning + "done\n") is None
    # A warning whose message lines quote a FileNotFoundError, then a real crash.
    quoted = (
        "/app/cache.py:12: UserWarning: could not read the cache, rebuilding\n"
        "FileNotFoundError: [Errno 2] No such file or directory: 'cache.json'\n"
        "  warnings.warn(\n"
    )
    found = _failed(quoted + "ValueError: Expected parameter loc of distribution Normal\n")
    assert found.failure_class == FailureClass.UNKNOWN
    assert found.evidence == "ValueError: Expected parameter loc of distribution Normal"
    # Nothing but the warning: still no missing-file alarm, and it is not quoted.
    alone = _failed(quoted)
    assert alone.failure_class == FailureClass.UNKNOWN
    assert "cache.json" not in alone.evidence


def test_a_run_that_ended_fine_never_alarms() -> None:
    # keras-team/keras#10506: every line says `error` (the metric); Nerogar/OneTrainer#223:
    # xformers prints the traceback of an optional import it caught.
    keras = "423/423 [====] - 192s 454ms/step - loss: 1.8386 - mean_squared_error: 0.0049\n"
    triton = "ModuleNotFoundError: No module named 'triton'\n"
    for log in (keras, triton, "RuntimeError: CUDA out of memory.\n"):
        assert diagnose(state=State.COMPLETED, exit_code=0, log_tail=log) is None


def test_an_unknown_failure_carries_the_last_lines() -> None:
    lines = [f"step {n}, loss=0.{n}" for n in range(30)] + ["", "ValueError: bad shape"]
    found = _failed("\n".join(lines) + "\n")
    assert found.failure_class == FailureClass.UNKNOWN
    assert len(found.last_lines) == LAST_LINES
    assert found.last_lines[-1] == "ValueError: bad shape"
    assert found.last_lines[0] == "step 11, loss=0.11"
    assert Diagnosis.from_json(found.as_json()) == found
    # Known failures do not carry them: their evidence says it.
    assert _failed("RuntimeError: CUDA error: out of memory\n").last_lines == ()


@pytest.mark.parametrize(
    "hostile",
    [
        "step " + " " * 65536,
        "1" * 65536,
        "[" * 32768 + "]" * 32768,
        "NCCL WARN " * 6554,
        "*** JOB " * 8192,
        "THCudaCheck FAIL file=" * 2979,
        "Root Cause (first observed failure):" * 1820,
        '  File "' * 8192,
        "UserWarning: " * 5041,
        "oom-kill " * 7281,
    ],
    ids=lambda s: repr(s[:12]),
)
def test_a_pathological_64_kib_line_is_read_and_bounded(hostile: str) -> None:
    log = hostile[:65536] + "\nRuntimeError: CUDA error: out of memory\n"
    found = _failed(log)
    assert found.failure_class == FailureClass.CUDA_OOM
    alone = _failed(hostile[:65536] + "\n")
    assert len(alone.evidence) <= 500
    assert all(len(line) <= 500 for line in alone.last_lines)
