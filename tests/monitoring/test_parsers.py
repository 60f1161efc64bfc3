import json

import pytest

from monitoring.reading.lines import MAX_LINE_BYTES, LineSplitter, finish_lines, split_lines
from monitoring.reading.parsers import MetricPoint, parse_metrics_jsonl, parse_stdout_metrics

# The shape of a real 2-GPU torchrun + ddp_train stdout.log (stderr merged in by Slurm),
# with a tqdm bar, a Hugging Face-style dict, a Lightning bar and the usual noise.
STDOUT = (
    "W0501 12:30:01.123000 140211 torch/distributed/run.py:792] \n"
    "W0501 12:30:01.123000 140211 torch/distributed/run.py:792] *****************************************\n"
    "W0501 12:30:01.123000 140211 torch/distributed/run.py:792] Setting OMP_NUM_THREADS environment "
    "variable for each process to be 1 in default, to avoid your system being overloaded, please "
    "further tune the variable for optimal performance in your application as needed. \n"
    "[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - "
    "Address already in use).\n"
    "gpu-node-01:2211:2211 [0] NCCL INFO Bootstrap : Using eth0:10.0.3.17<0>\n"
    "gpu-node-01:2211:2211 [0] NCCL INFO NCCL_IB_DISABLE=1\n"
    "gpu-node-01:2211:2211 [0] NCCL INFO cudaDriverVersion 12040\n"
    "NCCL version 2.21.5+cuda12.4\n"
    "gpu-node-01:2211:2290 [0] NCCL INFO ncclCommInitRank comm 0x55d5c3e0 rank 0 nranks 2 "
    "cudaDev 0 nvmlDev 0 busId 18000 commId 0x2c4f2b1e - Init COMPLETE\n"
    "gpu-node-01:2211:2290 [0] NCCL INFO Init timings: rank 0 nranks 2 total 0.52 (kernels 0.12, "
    "alloc 0.01, bootstrap 0.30)\n"
    "gpu-node-01:2211:2290 [0] NCCL INFO P2P Chunksize set to 131072\r\n"
    "ddp_train: world_size=2 backend=nccl device=cuda params=5313 batch_size=32 "
    "start_step=1 steps=200\n"
    "/opt/torch/optim/lr_scheduler.py:139: UserWarning: Detected call of `lr_scheduler.step()` "
    "before `optimizer.step()`. In PyTorch 1.1.0 and later, you should call them in the opposite "
    "order.\n"
    "step 1, loss=1.2345, samples_per_sec=812.4\n"
    "step 2, loss=0.9876, samples_per_sec=20311.9\n"
    "Training:   0%|          | 0/3 [00:00<?, ?it/s]\rTraining:  33%|███▎      | 1/3 "
    "[00:00<00:01,  1.9it/s]\rTraining: 100%|██████████| 3/3 [00:01<00:00,  2.1it/s]\n"
    "{'loss': 0.7321, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}\n"
    "Epoch 1:  50%|█████     | 50/100 [00:05<00:05,  9.80it/s, v_num=0, train_loss=0.532]\n"
    "INFO:rank 0: Epoch 0, step 10, loss=0.5321\n"
    "caf\xe9 \udcff\udcfe broken utf-8 \x00\x00 step 11 loss=0.5\x0012\n"
    "checkpoint step-50.pt saved (38211 bytes)\n"
    "timestamps 12:30:01 and v1.2.3 are not metrics\n"
).encode("utf-8", errors="surrogateescape")


def _lines(
    data: bytes, max_line: int = MAX_LINE_BYTES, chunks: list[int] | None = None
) -> list[str]:
    carry, lines = b"", []
    start = 0
    for end in [*(chunks or []), len(data)]:
        got, carry = split_lines(carry, data[start:end], max_line=max_line)
        lines += got
        start = end
    return lines + finish_lines(carry, max_line=max_line)


# --- Splitting -----------------------------------------------------------------------------


def test_tqdm_bar_counts_as_its_last_state_and_crlf_ends_a_line() -> None:
    lines = _lines(STDOUT)
    assert "Training: 100%|██████████| 3/3 [00:01<00:00,  2.1it/s]" in lines
    assert not any("33%" in line for line in lines)
    assert "gpu-node-01:2211:2290 [0] NCCL INFO P2P Chunksize set to 131072" in lines


def test_invalid_utf8_is_replaced_and_nul_bytes_dropped() -> None:
    line = next(line for line in _lines(STDOUT) if "broken" in line)
    assert line == "café \ufffd\ufffd broken utf-8  step 11 loss=0.512"


def test_every_chunk_boundary_gives_the_same_lines() -> None:
    whole = _lines(STDOUT)
    for cut in range(len(STDOUT) + 1):
        assert _lines(STDOUT, chunks=[cut]) == whole, cut


def test_every_chunk_boundary_gives_the_same_pieces_of_long_lines() -> None:
    # A small cap, so that cuts (never through a UTF-8 character) meet every boundary too.
    text = "ab\r" + "é" * 11 + "x\rshort\n" + "€" * 9 + "\r\r\n" + "z" * 40 + "\r"
    data = text.encode()
    whole = _lines(data, max_line=8)
    assert "é" * 4 in whole and "€€" in whole and "z" * 8 in whole
    assert all(len(line.encode()) <= 8 for line in whole)
    for cut in range(len(data) + 1):
        for second in range(cut, len(data) + 1, 3):
            assert _lines(data, max_line=8, chunks=[cut, second]) == whole, (cut, second)
    assert _lines(data, max_line=8, chunks=list(range(len(data)))) == whole


def test_a_10_mb_line_without_newline_never_grows_the_carry_past_the_cap() -> None:
    splitter = LineSplitter()
    pieces: list[str] = []
    for _ in range(10):
        pieces += splitter.feed(b"y" * 1_000_000)
        assert len(splitter.carry) <= MAX_LINE_BYTES
    pieces += splitter.feed(b"\nafter\n")
    assert all(len(piece) <= MAX_LINE_BYTES for piece in pieces)
    assert sum(len(piece) for piece in pieces[:-1]) == 10_000_000
    assert pieces[-1] == "after"


def test_a_bar_redrawn_forever_keeps_only_its_last_state() -> None:
    splitter = LineSplitter()
    for n in range(0, 100_000, 1000):
        bar = "".join(
            f"\r{i / 1000:5.1f}%|#  | {i}/100000 [00:01<00:10]" for i in range(n, n + 1000)
        )
        assert splitter.feed(bar.encode()) == []
        assert len(splitter.carry) < 100
    assert splitter.feed(b"\r") == []
    assert splitter.carry.endswith(b"\r")
    assert splitter.feed(b"\n") == [f"{99999 / 1000:5.1f}%|#  | 99999/100000 [00:01<00:10]"]


def test_the_carry_is_plain_bytes_that_resume_a_new_splitter() -> None:
    first = LineSplitter()
    assert first.feed(b"step 1, loss=0.5\nstep 2, lo") == ["step 1, loss=0.5"]
    second = LineSplitter(carry=bytes(first.carry))
    assert second.feed(b"ss=0.4\n") == ["step 2, loss=0.4"]
    assert second.feed(b"tail without newline") == []
    assert second.finish() == ["tail without newline"]
    assert second.carry == b""


# --- stdout metrics ------------------------------------------------------------------------


def test_real_log_yields_exactly_the_metrics_and_no_noise() -> None:
    points = parse_stdout_metrics(_lines(STDOUT), last_step=None)
    assert [(p.name, p.step, p.value) for p in points] == [
        ("loss", 1, 1.2345),
        ("samples_per_sec", 1, 812.4),
        ("loss", 2, 0.9876),
        ("samples_per_sec", 2, 20311.9),
        # A tqdm bar is a step counter (tests/corpus/README.md): 3 of 3, at 2.1 it/s.
        ("it_per_s", 3, 2.1),
        # Hugging Face's dict has no step: it shares the latest step, the bar's.
        ("loss", 3, 0.7321),
        ("grad_norm", 3, 1.2),
        ("learning_rate", 3, 5e-05),
        ("epoch", 3, 0.1),
        # A Lightning bar of 100 after the training bar of 3 is another loop: no step.
        ("loss", 10, 0.5321),
        ("epoch", 10, 0.0),
        ("loss", 11, 0.512),
    ]
    assert all(p.time is None for p in points)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Epoch 0, step 10, loss=0.5321", [("loss", 10, 0.5321), ("epoch", 10, 0.0)]),
        ("step 10, loss=0.53, lr=3e-4", [("loss", 10, 0.53), ("lr", 10, 3e-4)]),
        (
            "step 12 loss=0.4 acc=0.9 tokens/s=1234",
            [("loss", 12, 0.4), ("acc", 12, 0.9), ("tokens_per_s", 12, 1234.0)],
        ),
        ("Step: 7/1000 | train/loss = -0.5 | lr: 1E-4", [("train/loss", 7, -0.5), ("lr", 7, 1e-4)]),
        ("global_step=3 loss=0.25", [("loss", 3, 0.25)]),
        ("iteration 40/500 grad_norm=2.5", [("grad_norm", 40, 2.5)]),
        (
            "step 5 version=1.2.3 eta=0:01:02 dur=1.5s mem=3GB x=7",
            [("dur", 5, 1.5), ("mem", 5, 3.0), ("x", 5, 7.0)],
        ),
        ("\x1b[32mstep 6\x1b[0m, \x1b[1mloss\x1b[0m=0.75", [("loss", 6, 0.75)]),
        ("{'step': 9, 'eval_acc': 0.91, 'note': 'ok', 'flag': True}", [("eval_acc", 9, 0.91)]),
        ('{"loss": 0.3, "done": false}', [("loss", 0, 0.3)]),
        (
            "10/10 [====] - 1s 50ms/step - loss: 0.53 - accuracy: 0.81",
            [("ms_per_step", 10, 50.0), ("loss", 10, 0.53), ("accuracy", 10, 0.81)],
        ),
    ],
)
def test_default_patterns(line: str, expected: list[tuple[str, int, float]]) -> None:
    points = parse_stdout_metrics([line], last_step=None)
    assert [(p.name, p.step, p.value) for p in points] == expected


@pytest.mark.parametrize(
    "line",
    [
        "gpu-node-01:2211:2290 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
        "gpu-node-01:2211:2290 [0] NCCL INFO comm 0x5581 rank 0 nRanks 2 nNodes 1 localRanks=2",
        "NCCL_DEBUG=INFO NCCL_IB_DISABLE=1 NCCL_P2P_LEVEL=NVL timeout=1800",
        "ddp_train: world_size=2 backend=nccl params=5313 batch_size=32 start_step=1 steps=200",
        "{'lr': 0.001, 'batch_size': 32}",
        "Map: 100%|██████████| 1000/1000 [00:00<00:00, 5000.00 examples/s]",
        "{'loss': __import__('os').system('true')}",
        "{'x': " + "[" * 1500 + "]" * 1500 + ", 'loss': 1}",
        "stopping after step 50 on SIGTERM (another rank's or ours)",
        "",
    ],
)
def test_noise_gives_no_points(line: str) -> None:
    assert parse_stdout_metrics([line], last_step=None) == []


def test_stepless_lines_count_on_from_last_step_unless_a_step_came_first() -> None:
    hf = ["{'loss': 0.9, 'epoch': 0.1}", "{'loss': 0.8, 'epoch': 0.2}", "loss: 0.7"]
    assert [p.step for p in parse_stdout_metrics(hf, last_step=None) if p.name == "loss"] == [
        0,
        1,
        2,
    ]
    assert [p.step for p in parse_stdout_metrics(hf, last_step=2) if p.name == "loss"] == [3, 4, 5]
    mixed = [
        "resumed from /ckpt/step-50.pt at step 50",
        "val loss: 0.4",
        "step 51 loss=0.3",
        "val_loss=0.2",
    ]
    # `at step 50` sets the step; `val loss` is one label (val_loss), not `loss`.
    assert [(p.name, p.step) for p in parse_stdout_metrics(mixed, last_step=49)] == [
        ("val_loss", 50),
        ("loss", 51),
        ("val_loss", 51),
    ]


def test_extra_patterns_add_to_and_override_the_defaults() -> None:
    lines = ["it 30 | ppl ~ 12.5 | loss=0.3", "[eval] it=31 bleu 27.1", "no match here"]
    points = parse_stdout_metrics(
        lines,
        extra_patterns=[
            r"\bit[ =](?P<step>\d+)\b",
            r"(?P<name>ppl) ~ (?P<value>\S+)",
            r"bleu (?P<bleu>[\d.]+)",
            r"loss=(?P<loss>[\d.]+)",
            r"(a+)+(?P<bad>x)",  # invalid: skipped, not raised
            "(",
        ],
        last_step=None,
    )
    # `it 30` is a `label value` field by default; the user's pattern makes it the step.
    assert [(p.name, p.step, p.value) for p in points] == [
        ("it", 30, 30.0),
        ("loss", 30, 0.3),
        ("ppl", 30, 12.5),
        ("it", 31, 31.0),
        ("bleu", 31, 27.1),
    ]


def test_extra_patterns_only_see_the_first_4_kib_of_a_line() -> None:
    line = "x" * 5000 + " acc 0.5"
    assert parse_stdout_metrics([line], extra_patterns=[r"acc (?P<acc>\S+)"], last_step=1) == []


# --- metrics.jsonl -------------------------------------------------------------------------


def test_jsonl_from_the_example_trainer_and_its_ugly_neighbours() -> None:
    good = json.dumps({"step": 3, "loss": 0.4123, "samples": 192, "time": 1777000000.25})
    lines = [
        good,
        "",
        "   ",
        '{"step": 4, "loss": NaN, "samples": 256, "time": 1777000001.5, "tag": "x", "nested": {"a": 1}}',
        '{"step": 5.0, "loss": 0.3, "time": "yesterday", "ok": true}',
        '{"step": 6, "loss": 0.2',  # cut mid-object
        "[1, 2]",
        '{"loss": 0.1}',
        '{"step": "7", "loss": 0.1}',
        '{"step": 7.5, "loss": 0.1}',
        '{"step": -1, "loss": 0.1}',
        '{"step": true, "loss": 0.1}',
        '{"step": 8, "big": ' + "9" * 5000 + "}",
        "[" * 100_000,
        "\x00\x00" + json.dumps({"step": 9, "tokens": 4096}),
    ]
    points, bad = parse_metrics_jsonl(lines)
    assert bad == 9
    assert points == [
        MetricPoint("loss", 3, 0.4123, 1777000000.25),
        MetricPoint("samples", 3, 192.0, 1777000000.25),
        MetricPoint("samples", 4, 256.0, 1777000001.5),
        MetricPoint("loss", 5, 0.3, None),
        MetricPoint("tokens", 9, 4096.0, None),
    ]


def test_jsonl_lines_survive_the_splitter_at_any_boundary() -> None:
    data = b"".join(
        (
            json.dumps(
                {"step": s, "loss": 1 / s, "note": "\u00e9\u4e2d", "time": 1e9 + s},
                ensure_ascii=False,
            )
            + "\n"
        ).encode()
        for s in range(1, 6)
    )
    whole = parse_metrics_jsonl(_lines(data))
    assert whole[1] == 0 and len(whole[0]) == 5
    for cut in range(len(data) + 1):
        assert parse_metrics_jsonl(_lines(data, chunks=[cut])) == whole


def test_reader_state_carries_steps_across_polls_and_a_provisional_bar_is_stored_once() -> None:
    state: dict[str, object] = {}
    bar = "Epoch 1:   4%|▍         | 45/1000 [00:05<01:58,  8.08it/s, v_num=3, loss=0.598]"
    first = parse_stdout_metrics(
        ["Epoch 0: 100%|█| 1000/1000 [01:00<00:00, 9.1it/s, v_num=3]"], state=state, provisional=bar
    )
    assert [(p.name, p.step) for p in first if p.name == "loss"] == [("loss", 1045)]
    assert state["epoch_base"] == 0
    # The same segment completes: not stored again; a step-less line attaches to step 1045
    # (its epoch, 1, went with the bar in the first poll: not given twice).
    second = parse_stdout_metrics([bar, "val_loss: 0.5"], state=state)
    assert [(p.name, p.step, p.value) for p in second] == [("val_loss", 1045, 0.5)]
    parse_stdout_metrics([" 50%|█████     | 500/1000 [03:10<03:10,  2.62it/s]"], state=state)
    assert state["total_steps"] == 1000  # for the progress bar and ETA
