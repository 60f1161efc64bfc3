"""A fork of the example trainer: resumed from a checkpoint with another --lr, it trains with it."""

from pathlib import Path

from tests.examples.test_ddp_train import full_run, job_bin, steps, train  # noqa: F401  (fixtures)

COMMON = ("--checkpoint-every", "5", "--keep", "2", "--batch-size", "32")


def test_a_resume_with_a_new_learning_rate_trains_with_it(
    job_bin: Path,  # noqa: F811
    full_run: tuple[Path, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    # full_run: 20 steps at the default --lr 0.01, its checkpoints every 5 steps.
    _, full_out = full_run
    first = train(job_bin, tmp_path / "first", "--steps", "10", *COMMON)
    checkpoint = tmp_path / "first" / "checkpoints" / "step-10.pt"
    assert sorted(steps(first.stdout)) == list(range(1, 11)) and checkpoint.is_file()

    forked = train(
        job_bin,
        tmp_path / "fork",
        "--steps",
        "20",
        "--lr",
        "0.003",
        *COMMON,
        PORTAL_RESUME_FROM=str(checkpoint),
    )
    assert "start_step=11" in forked.stdout
    assert "learning rate 0.01 -> 0.003: --lr replaces the checkpoint's" in forked.stdout
    losses = steps(forked.stdout)
    assert min(losses) == 11 and sorted(losses) == list(range(11, 21))
    # The first step after the checkpoint already differs from the run that kept 0.01.
    assert losses[12] != steps(full_out)[12]

    # Its own checkpoint carries on with 0.003: a resume of the fork changes nothing more.
    again = train(
        job_bin,
        tmp_path / "again",
        "--steps",
        "20",
        "--lr",
        "0.003",
        *COMMON,
        PORTAL_RESUME_FROM=str(tmp_path / "fork" / "checkpoints" / "step-15.pt"),
    )
    assert "learning rate" not in again.stdout
    assert steps(again.stdout) == {s: loss for s, loss in losses.items() if s > 15}
