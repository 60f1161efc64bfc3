"""When a line without a step counter may add its values to the latest step.

After a training line, a job prints much that is no metric of that step: NCCL's
`NCCL INFO bootstrap.cc:176 -> 2`, the kernel's `Xid ... Ch 00000003 intr 10000000`,
a command echo `--batchsize 32`, a config echo `Random Seed: 1536`, a scheduler's
`resources: mem_mb=14000, tmpdir=/tmp`. A step-less line attaches only when it reads
as a metrics line: at least one of its names is a metric's (a loss, an accuracy, a
rate, a time, a memory figure...), no segment of it is prose, no `key=word` setting,
no command-line option, no code call, no file name, and nothing of an error report
came since the step. The one exception is a step line that is a heading
(`[batch=100/4800]:`): the indented lines under it are its values, whatever their names.
Pure; each check is one pass over the tokens.
"""

from __future__ import annotations

from collections.abc import Iterable

from monitoring.reading.tokens import BIND, OPEN, OPEN_DICT, SEP, SLASH, WORD, Token

# Pieces of a series name (split at `_` `/` and digits) that say it measures training.
METRIC_WORDS = frozenset(
    {
        # objectives and errors
        "loss", "losses", "nll", "ce", "kl", "entropy", "error", "err", "mse", "mae", "rmse",
        "ppl", "perplexity", "bpb", "bpc", "reward", "rewards", "return", "returns", "value",
        # scores
        "acc", "accuracy", "top", "f1", "bleu", "rouge", "meteor", "map", "ap", "ar", "auc",
        "roc", "precision", "prec", "recall", "score", "iou", "miou", "dice", "psnr", "ssim",
        "fid", "wer", "cer", "em", "exact", "match", "correlation", "pearson", "spearman",
        "mcc", "ndcg", "mrr", "hit", "hits",
        # optimisation
        "lr", "learning", "rate", "grad", "gnorm", "norm", "clip", "scale", "momentum",
        "weight", "decay", "wd",
        # throughput and time
        "per", "throughput", "speed", "tps", "wps", "ups", "tflops", "flops", "mfu", "time",
        "runtime", "duration", "latency", "elapsed", "tokens", "samples", "images",
        "forward", "backward", "optimizer", "step", "data",
        # memory
        "mem", "memory", "allocated", "reserved",
    }
)  # fmt: skip
# A word that is a file's name: a source, script, config, checkpoint or log file.
_FILE_SUFFIXES = (
    ".py", ".cc", ".cpp", ".cxx", ".c", ".h", ".hpp", ".cu", ".cuh", ".sh", ".so", ".json",
    ".yaml", ".yml", ".txt", ".log", ".toml", ".cfg", ".pt", ".pth", ".ckpt", ".bin",
)  # fmt: skip


def metric_name(name: str) -> bool:
    """Whether a series name has a piece that names something training measures."""
    pieces = "".join(c if c.isalpha() else " " for c in name.lower()).split()
    return "loss" in name.lower() or any(piece in METRIC_WORDS for piece in pieces)


def _option_at(tokens: list[Token], i: int) -> bool:
    """`-s 10`, `--gpu_ids 0`: one or two dashes glued to a word, after a space or at the start."""
    j = i - 1
    while j >= 0 and tokens[j].kind == SEP and tokens[j].text == "-":
        j -= 1
    dashes = i - 1 - j
    return dashes in (1, 2) and (j < 0 or not tokens[j].text.strip())


def _setting_or_code(tokens: list[Token]) -> bool:
    """`key=word`, a command-line option, `call(key=...)`, or a file name anywhere on the line."""
    for i, token in enumerate(tokens):
        kind = token.kind
        if kind == WORD and (
            token.text.lower().endswith(_FILE_SUFFIXES) or (i and _option_at(tokens, i))
        ):
            return True
        if kind not in (BIND, OPEN) or not i or i + 1 >= len(tokens):
            continue
        before, nxt = tokens[i - 1].kind, tokens[i + 1]
        if before != WORD:
            continue
        if kind == BIND and token.text == "=" and nxt.kind in (WORD, SLASH):
            return True  # `tmpdir=/tmp`, `name=python3`, `backend=backend`
        if kind == OPEN and nxt.kind == WORD and tokens[i + 2 : i + 3] == [Token(BIND, "=")]:
            return True  # `init_process_group(backend=...`, `Pad(padding=10, ...)`
    return False


def metrics_line(
    tokens: list[Token], names: Iterable[str], *, prose: bool, under_heading: bool
) -> bool:
    """Whether a step-less line's values belong to the latest step."""
    if prose or _setting_or_code(tokens):
        return False
    return under_heading or any(metric_name(name) for name in names if name != "epoch")


def configuration_echo(tokens: list[Token], fields: Iterable[tuple[str, object]]) -> bool:
    """A `key=value` line of settings (`lr=0.001 batch_size=32 epochs=10 warmup=100`),
    printed once before training: two integers or more under names that measure nothing
    (sizes and counts a record never holds without its step). A dict is a record."""
    if not any(t.kind == BIND and t.text == "=" for t in tokens):
        return False
    if any(t.kind == OPEN_DICT for t in tokens):
        return False
    counts = [name for name, value in fields if isinstance(value, int) and not metric_name(name)]
    return len(counts) >= 2
