"""The submit-time check of a job's own metric patterns: what RE2 runs, and how many."""

import pytest

from jobs.patterns import MAX_PATTERNS, validate_pattern, validate_patterns


@pytest.mark.parametrize(
    ("pattern", "complaint"),
    [
        ("", "empty"),
        ("a" * 501, "at most 500"),
        ("(?P<loss>[0-9.]+", "cannot be compiled by RE2 (missing )"),
        (r"loss=([0-9.]+)", "no named groups"),
        (r"(?P<name>\w+)=\d+", "both (?P<name>...) and (?P<value>...)"),
        (r"(?P<name>\w+)=(?P<value>\d+) (?P<acc>\d)", "mixes name/value groups"),
        # What only a backtracking engine has is refused, and the message says so.
        (r"(?P<loss>\d+)\s+\1", "no backreferences"),
        (r"(?P<loss>(?=\d)\d+)", "lookarounds"),
        (r"(?P<loss>(?>\d+\s?)+)", "atomic groups"),
        (r"(?P<loss>(?:\d++\s?)+)", "possessive quantifiers"),
        (r"(?P<loss>(a{100}){100})", "(a{100}){100}"),
    ],
)
def test_validate_pattern_says_what_to_change(pattern: str, complaint: str) -> None:
    message = validate_pattern(pattern)
    assert message is not None and complaint in message


@pytest.mark.parametrize(
    "pattern",
    [
        r"step (?P<step>\d+).*?loss=(?P<loss>[-+.\deE]+)",
        r"(?P<name>[a-z_]+) ~ (?P<value>\S+)",
        r"(?P<loss>\d+(?:\.\d+)?)",
        r"(?i)(?P<acc>[(]+\d+)",
        r"(?P<x>(?:ab){3}(?:c|d)?\(+)",
        # Exponential on a backtracking engine; linear on RE2, so nothing to refuse.
        r"(?P<loss>(?:(?:a|a))*b)",
        r"(?P<loss>(\d+)+)x",
    ],
)
def test_validate_pattern_accepts_what_re2_runs(pattern: str) -> None:
    assert validate_pattern(pattern) is None


def test_more_patterns_than_the_cap_are_refused_with_the_number_to_keep() -> None:
    text = "\n".join(f"m{i}=(?P<m{i}>[0-9.]+)" for i in range(MAX_PATTERNS + 1))
    problems = validate_patterns(text)
    assert problems == [
        f"There are {MAX_PATTERNS + 1} patterns; keep at most {MAX_PATTERNS} "
        "(one pattern can match several metrics with (?P<name>...) and (?P<value>...))."
    ]
    assert validate_patterns("\n".join(text.splitlines()[:MAX_PATTERNS]) + "\n\n") == []


def test_5000_patterns_get_one_message_not_5000() -> None:
    problems = validate_patterns("\n".join(["(" for _ in range(5000)]))
    assert len(problems) <= MAX_PATTERNS + 2
    assert "There are 5000 patterns" in problems[0]
