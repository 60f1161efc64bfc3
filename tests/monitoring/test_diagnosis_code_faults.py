"""Failures of the code or the data, not of the machine: a device-side assert, a divergence.

Each rule meets the wordings it must read (their sources in comments) and the text it
must leave alone. The real captures are tests/corpus/failures/*_h200.log (an NVIDIA H200,
`devtools/gpu_check/run2.sh`); before, both ended as an unknown failure.
"""

import pytest

from jobs.enums import FailureClass, State
from monitoring.diagnosis.diagnose import Diagnosis, diagnose
from tests.corpus.loader import FAILURES_DIR

ASSERT_LOG = (FAILURES_DIR / "device_assert_embedding_index_h200.log").read_text()
KERNEL_LINE = ASSERT_LOG.splitlines()[0]
NAN_LOG = (FAILURES_DIR / "diverged_floating_point_error_h200.log").read_text()
NCCL_INFO_LOG = (FAILURES_DIR / "none_nccl_debug_info_h200.log").read_text()


def _failed(log: str, exit_code: int = 1) -> Diagnosis:
    found = diagnose(state=State.FAILED, exit_code=exit_code, log_tail=log)
    assert found is not None
    return found


def test_a_device_side_assert_quotes_the_kernels_line_and_says_what_to_check() -> None:
    found = _failed(ASSERT_LOG)
    assert found.failure_class == FailureClass.DEVICE_ASSERT
    assert found.evidence == KERNEL_LINE  # the first of 64: it names the kernel and the check
    assert "indexSelectSmallIndex" in found.evidence and "srcIndex < srcSelectDimSize" in (
        found.evidence
    )
    fixes = " ".join(found.fixes)
    assert "CUDA_LAUNCH_BLOCKING=1" in fixes
    assert "embedding" in fixes and "number of classes" in fixes


# sgl-project/sglang#1274 (torch 2.4), our H200 capture (torch 2.11: the error, and the
# runtime's name in the hint after it), sgl-project/sglang#271 (the NCCL watchdog's
# `what():`), NVIDIA/nccl#1504 (NCCL's own WARN), MhLiao/DB#233 (thrust, torch 1.5),
# heterodb/pg-strom#376 (the driver API, and a kernel's assert that is not torch's).
@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: device-side assert triggered",
        "torch.AcceleratorError: CUDA error: device-side assert triggered",
        "Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
        "group__CUDART__TYPES.html for more information.",
        "  what():  [PG 1 Rank 1] Process group watchdog thread terminated with exception: CUDA "
        "error: device-side assert triggered",
        "678c7278cb2d:26024:27098 [1] include/alloc.h:125 NCCL WARN Cuda failure 710 "
        "'device-side assert triggered'",
        "RuntimeError: transform: failed to synchronize: cudaErrorAssert: device-side assert "
        "triggered",
        "failed on cuCtxSynchronize: CUDA_ERROR_ASSERT - device-side assert triggered",
        "pg_strom:5109: void gpujoin_projection_row(kern_gpujoin *, kern_multirels *, "
        "kern_data_store *, kern_data_store *, kern_resultbuf *): block: [273,0,0], thread: "
        "[760,0,0] Assertion `pos == (pos & ~7)` failed.",
    ],
)
def test_a_device_side_assert_in_every_wording(line: str) -> None:
    boilerplate = "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
    found = _failed(f"{line}\n{boilerplate}\n")
    assert found.failure_class == FailureClass.DEVICE_ASSERT
    assert found.evidence == line.strip()


def test_a_device_side_assert_wins_over_the_ranks_and_the_launcher_it_takes_down() -> None:
    log = (
        f"[rank1]: {KERNEL_LINE}\n"
        "[rank0]:[E1204 11:47:02.1 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600000 "
        "milliseconds before timing out.\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "srun: error: n2: task 1: Exited with exit code 1\n"
    )
    found = _failed(log)
    assert found.failure_class == FailureClass.DEVICE_ASSERT
    assert found.evidence == f"[rank1]: {KERNEL_LINE}"
    assert found.rank == 1


def test_the_boilerplate_of_any_cuda_error_is_no_device_side_assert() -> None:
    # kijai/ComfyUI-WanVideoWrapper#565: torch says how to enable the asserts under every
    # CUDA error, an out-of-memory one too.
    log = (
        "RuntimeError: CUDA error: out of memory\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
    )
    assert _failed(log).failure_class == FailureClass.CUDA_OOM


def test_a_run_stopped_by_its_nan_check_diverged() -> None:
    found = _failed(NAN_LOG)
    assert found.failure_class == FailureClass.DIVERGED
    assert found.evidence == "FloatingPointError: loss is NaN at step 5"
    fixes = " ".join(found.fixes)
    assert "learning rate" in fixes and "clip_grad_norm_" in fixes and "bf16" in fixes


# facebookresearch/fairseq (trainer.py), pytorch autograd's anomaly mode (torch/autograd),
# facebookresearch/deit and mae (engine.py), NVIDIA/Megatron-LM (param_and_grad_buffer.py),
# deepspeedai/DeepSpeed (fp16/loss_scaler.py), open-mmlab/mmcv CheckInvalidLossHook,
# Lightning-AI/pytorch-lightning (utilities/finite_checks.py).
@pytest.mark.parametrize(
    "line",
    [
        "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably "
        "exploding. Try lowering the learning rate, using gradient clipping or increasing the "
        "batch size.",
        "RuntimeError: Function 'MulBackward0' returned nan values in its 0th output.",
        "Loss is nan, stopping training",
        "Loss is inf, stopping training",
        "AssertionError: Rank 13: found NaN in local grad norm in backward pass before "
        "data-parallel communication collective. Device: 5, node: node-15-11",
        "Exception: Current loss scale already at minimum - cannot decrease scale anymore. "
        "Exiting run.",
        "2023-03-01 10:00:00,000 - mmdet - INFO - loss become infinite or NaN!",
        "ValueError: Detected nan and/or inf values in `c_d1.bias`. Check your forward pass for "
        "numerically unstable operations.",
    ],
)
def test_a_divergence_in_every_wording(line: str) -> None:
    found = _failed(f"step 12, loss=nan\n{line}\n")
    assert found.failure_class == FailureClass.DIVERGED
    assert found.evidence == line


def test_a_nan_printed_before_another_failure_is_that_failure() -> None:
    """A `loss=nan` is a value of the curve (its alert says so), not why the job ended."""
    log = "step 5, loss=nan\nRuntimeError: CUDA error: out of memory\n"
    assert _failed(log).failure_class == FailureClass.CUDA_OOM
    unknown = _failed("step 5, loss=nan\nKeyError: 'label'\n")
    assert unknown.failure_class == FailureClass.UNKNOWN


def test_nccl_info_lines_of_a_healthy_init_are_no_nccl_failure() -> None:
    """`NET/IB : No device found.`, `Failed to initialize NET plugin IB`, a RAS socket: a
    job that failed afterwards for another reason is not blamed on NCCL."""
    assert "Failed to initialize NET plugin IB" in NCCL_INFO_LOG
    found = _failed(NCCL_INFO_LOG + "KeyError: 'label'\n")
    assert found.failure_class == FailureClass.UNKNOWN
    assert found.evidence == "KeyError: 'label'"
