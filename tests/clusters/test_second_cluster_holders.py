"""The second cluster runs while any test holds it: the last one out, and only it, stops it."""

from pathlib import Path

from tests.fixtures import sandbox


def test_only_the_last_holder_takes_the_second_cluster_down(tmp_path: Path, monkeypatch) -> None:
    calls: list[str] = []

    def up(state_dir: Path) -> str:
        calls.append("up")
        return "info"

    def down(state_dir: Path) -> list[str]:
        calls.append("down")
        return []

    monkeypatch.setattr(sandbox.second, "up", up)
    monkeypatch.setattr(sandbox.second, "down", down)
    # Two tests at once (each lock its own open file, as in two xdist workers).
    with sandbox.second_cluster_up(tmp_path) as first:
        with sandbox.second_cluster_up(tmp_path):
            assert first == "info" and calls == ["up", "up"]
        assert calls == ["up", "up"]  # the other test still holds it
    assert calls == ["up", "up", "down"]
    with sandbox.second_cluster_up(tmp_path):
        pass
    assert calls == ["up", "up", "down", "up", "down"]
