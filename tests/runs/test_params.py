"""The parameter table's parser and caps (jobs.params), on commands as their projects print them."""

import pytest

from jobs.params import (
    MAX_PARAMS,
    MAX_VALUE_CHARS,
    SOURCE_COMMAND,
    SOURCE_GIVEN,
    SOURCE_LOGGED,
    params_clean,
    params_for_spec,
    params_from_command,
    params_from_lines,
    params_merge,
)

# Verbatim from huggingface/transformers examples/pytorch/language-modeling/README.md
# ("GPT-2/GPT and causal language modeling").
RUN_CLM = """python run_clm.py \\
    --model_name_or_path openai-community/gpt2 \\
    --dataset_name wikitext \\
    --dataset_config_name wikitext-2-raw-v1 \\
    --per_device_train_batch_size 8 \\
    --per_device_eval_batch_size 8 \\
    --do_train \\
    --do_eval \\
    --output_dir /tmp/test-clm"""

# Verbatim from this repository's examples/ddp_train.py docstring and README.
DDP_TRAIN = "ddp_train.py --steps 200 --checkpoint-every 50"

# Verbatim from karpathy/nanoGPT README.md ("quick start", the CPU run).
NANOGPT = (
    "python train.py config/train_shakespeare_char.py --device=cpu --compile=False "
    "--eval_iters=20 --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 "
    "--n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0"
)


def test_hugging_face_flags_with_switches_and_line_continuations() -> None:
    assert params_from_command(RUN_CLM) == {
        "model_name_or_path": "openai-community/gpt2",
        "dataset_name": "wikitext",
        "dataset_config_name": "wikitext-2-raw-v1",
        "per_device_train_batch_size": 8,
        "per_device_eval_batch_size": 8,
        "do_train": True,
        "do_eval": True,
        "output_dir": "/tmp/test-clm",
    }


def test_the_example_trainers_flags() -> None:
    assert params_from_command(DDP_TRAIN) == {"steps": 200, "checkpoint-every": 50}


def test_equals_flags_with_python_booleans_and_floats() -> None:
    params = params_from_command(NANOGPT)
    assert params["device"] == "cpu"
    assert params["compile"] is False
    assert params["dropout"] == 0.0 and isinstance(params["dropout"], float)
    assert params["n_layer"] == 4 and params["max_iters"] == 2000
    assert "config/train_shakespeare_char.py" not in params


def test_negative_numbers_are_values_and_shell_operators_end_a_switch() -> None:
    command = "python t.py --shift -0.5 --verbose | tee out.log && echo --done"
    assert params_from_command(command) == {"shift": -0.5, "verbose": True, "done": True}


def test_an_unclosed_quote_still_reads_the_flags() -> None:
    assert params_from_command("python t.py --lr 3e-4 --name 'oops")["lr"] == 3e-4


def test_caps_on_keys_values_and_count() -> None:
    flags = " ".join(f"--k{i} {i}" for i in range(MAX_PARAMS + 50))
    assert len(params_from_command(flags)) == MAX_PARAMS
    long = params_from_command("t.py --note " + "x" * 10_000)
    assert long["note"] == "x" * MAX_VALUE_CHARS
    clean, problems = params_clean(
        {"ok": 1, "bad key!": 2, "nested": {"a": 1}, "nan": float("nan")}
    )
    assert clean == {"ok": 1}
    assert len(problems) == 3


def test_sources_and_precedence() -> None:
    table, sources = params_for_spec(command="t.py --lr 0.1 --seed 1", given={"lr": 0.2})
    assert table == {"lr": 0.2, "seed": 1}
    assert sources == {"lr": SOURCE_GIVEN, "seed": SOURCE_COMMAND}
    table, sources = params_merge(table, sources, {"lr": 0.3, "world_size": 4}, SOURCE_LOGGED)
    assert table["lr"] == 0.3 and sources["lr"] == SOURCE_LOGGED and table["world_size"] == 4


def test_a_full_table_takes_no_new_keys() -> None:
    full = {f"k{i}": i for i in range(MAX_PARAMS)}
    table, _ = params_merge(full, {}, {"new": 1, "k0": 7}, SOURCE_LOGGED)
    assert "new" not in table and table["k0"] == 7


@pytest.mark.parametrize(
    ("text", "problems"), [("lr=0.1\n# note\n\nseed=2", 0), ("lr 0.1", 1), ("1x=2", 1)]
)
def test_the_forms_lines(text: str, problems: int) -> None:
    _, found = params_from_lines(text)
    assert len(found) == problems
