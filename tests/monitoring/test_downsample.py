"""Min/max bucket downsampling: properties checked over many random series."""

import numpy as np
import pytest

from monitoring.series.read import downsample


def reference(xs: np.ndarray, ys: np.ndarray, max_points: int) -> list[int]:
    """The indices to keep, one point at a time, as the docstring of `downsample` says."""
    n = len(xs)
    if n <= max_points:
        return list(range(n))
    buckets = (max_points - 2) // 2
    keep = {0, n - 1}
    span = xs[-1] - xs[0]
    members: dict[int, list[int]] = {}
    for i in range(n):
        b = min(int((xs[i] - xs[0]) * (buckets / span)), buckets - 1) if span > 0 else 0
        members.setdefault(b, []).append(i)
    for indices in members.values() if buckets else []:
        values = [ys[i] for i in indices]
        keep.add(indices[values.index(min(values))])
        keep.add(indices[values.index(max(values))])
    return sorted(keep)


def random_series(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(0, 3000))
    kind = rng.integers(0, 4)
    if kind == 0:  # steps
        xs = np.arange(n, dtype=float)
    elif kind == 1:  # GPU samples: jittered seconds with a few long gaps
        gaps = np.where(rng.random(n) < 0.005, rng.uniform(600, 7200, n), 0.0)
        xs = np.cumsum(rng.uniform(0.9, 1.1, n) + gaps) + 1.7e9
    elif kind == 2:  # repeated steps, as after a resume
        xs = np.sort(rng.integers(0, max(n // 3, 1), n)).astype(float)
    else:  # one x for all
        xs = np.full(n, 42.0)
    ys = rng.normal(size=n)
    if rng.random() < 0.3:
        ys = np.round(ys)  # many ties
    if n and rng.random() < 0.5:
        ys[rng.integers(0, n)] = rng.choice([1e9, -1e9])  # a spike
    return xs, ys


@pytest.mark.parametrize("seed", range(20))
def test_properties_hold_for_random_series(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(25):
        xs, ys = random_series(rng)
        max_points = int(rng.integers(2, 600))
        out_x, out_y = downsample(xs, ys, max_points)

        assert len(out_x) == len(out_y) <= max(max_points, 0)
        if len(xs) <= max_points:
            assert np.array_equal(out_x, xs) and np.array_equal(out_y, ys)
            continue
        # The first and last points, and with a bucket or more the spikes, are always kept.
        assert (out_x[0], out_y[0]) == (xs[0], ys[0])
        assert (out_x[-1], out_y[-1]) == (xs[-1], ys[-1])
        if max_points >= 4:
            assert ys.max() in out_y and ys.min() in out_y
        assert np.all(np.diff(out_x) >= 0)
        # Exactly the points of each bucket's first min and first max, in x order.
        keep = reference(xs, ys, max_points)
        assert np.array_equal(out_x, xs[keep]) and np.array_equal(out_y, ys[keep])


def test_each_bucket_keeps_its_min_and_max() -> None:
    xs = np.arange(1000, dtype=float)
    ys = np.sin(xs / 7.0)
    ys[500] = 5.0
    ys[501] = -5.0
    out_x, out_y = downsample(xs, ys, 102)  # 50 buckets of 20 points
    for start in range(0, 1000, 20):
        bucket = slice(start, start + 20)
        inside = (out_x >= start) & (out_x < start + 20)
        assert out_y[inside].max() == ys[bucket].max()
        assert out_y[inside].min() == ys[bucket].min()
        assert 2 <= inside.sum() <= 4  # its min and max, plus the first or last point


def test_gaps_give_empty_buckets_not_wide_ones() -> None:
    # Two hours of 1 Hz GPU samples a day apart: 249 buckets of 376 s, 20 of them used.
    rng = np.random.default_rng(7)
    xs = np.concatenate([np.arange(3600.0), np.arange(3600.0) + 90_000])
    ys = rng.normal(size=len(xs))
    out_x, out_y = downsample(xs, ys, 500)
    assert len(out_x) <= 2 + 2 * 20
    assert not np.any((out_x > 3599) & (out_x < 90_000))
    assert ys.max() in out_y and ys.min() in out_y


def test_unsorted_input_comes_back_sorted() -> None:
    xs = np.array([3.0, 1.0, 2.0, 0.0])
    ys = np.array([30.0, 10.0, 20.0, 0.0])
    out_x, out_y = downsample(xs, ys, 10)
    assert out_x.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert out_y.tolist() == [0.0, 10.0, 20.0, 30.0]


def test_two_points_are_the_first_and_last() -> None:
    out_x, out_y = downsample(np.arange(10.0), np.arange(10.0) ** 2, 2)
    assert out_x.tolist() == [0.0, 9.0] and out_y.tolist() == [0.0, 81.0]


def test_empty_and_single() -> None:
    assert [a.tolist() for a in downsample([], [], 10)] == [[], []]
    assert [a.tolist() for a in downsample([1.0], [2.0], 2)] == [[1.0], [2.0]]


@pytest.mark.parametrize(
    ("xs", "ys", "max_points"),
    [([1.0, 2.0], [1.0], 10), ([[1.0]], [[1.0]], 10), ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], 1)],
)
def test_bad_input_is_refused(xs: list, ys: list, max_points: int) -> None:
    with pytest.raises(ValueError):
        downsample(xs, ys, max_points)
