"""Strip what a logger puts before a training line: timestamps, levels, logger names,
`file.py:123]`, `[rank0]:`, `[titan]`, `stdout:`; and ANSI colour codes anywhere.

Pure and linear: bounded scans from the start of the line, one linear regex for ANSI.
"""

from __future__ import annotations

import re

# CSI sequences: parameters, intermediates, one final byte. No nested quantifiers.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
LEVELS = ("CRITICAL", "WARNING", "ERROR", "DEBUG", "INFO", "WARN", "NOTICE")
_LEVEL_WINDOW = 100
_FILE_WINDOW = 200
_STREAMS = ("stdout:", "stderr:")
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}


def strip_ansi(line: str) -> str:
    return _ANSI.sub("", line) if "\x1b" in line else line


def _is_prefix_bracket(inner: str) -> bool:
    """`[rank0]`, `[INFO]`, `[2022-03-11 02:06:58,985]`, `[timer.py:189:stop]`; not `[3]`."""
    if "=" in inner or not inner.strip():
        return False
    if any(c.isalpha() for c in inner):
        return True
    return ":" in inner or "-" in inner


def _date_time_end(text: str) -> int:
    """End of a leading `2024-05-01 12:00:00,123`, `10/30 22:19:28`, `05/01/2024`; 0 if none."""
    i, n = 0, len(text)
    while i < n and (text[i].isdigit() or text[i] in "-/"):
        i += 1
    date = text[:i]
    seps = sum(c in "-/" for c in date)
    if not date or not date[0].isdigit() or not date[-1].isdigit():
        date, i, seps = "", 0, 0
    j = i + 1 if date and i < n and text[i] in " T" else i
    k = j
    while k < n and (text[k].isdigit() or text[k] == ":"):
        k += 1
    clock = text[j:k]
    if clock.count(":") >= 2 and clock[0].isdigit() and clock[-1].isdigit():
        if k < n and text[k] in ".,":
            k += 1
            while k < n and text[k].isdigit():
                k += 1
        return k
    return i if seps >= 2 and len(date) >= 8 else 0


def _level_end(text: str) -> tuple[int, str]:
    """End of a log level word (and a logger name after it) near the start, and the level."""
    window = text[:_LEVEL_WINDOW]
    best = -1
    for level in LEVELS:
        at = window.find(level)
        while at >= 0:
            before = window[at - 1] if at else " "
            after = window[at + len(level) : at + len(level) + 1] or " "
            if before in " [|-:" and after in " ]|-:" and "=" not in window[:at]:
                if best < 0 or at < best:
                    best = at
                break
            at = window.find(level, at + 1)
    if best < 0:
        return 0, ""
    level = next(lv for lv in LEVELS if text.startswith(lv, best))
    i = best + len(level)
    if text.startswith("]", i):
        i += 1
    if text.startswith(":", i):  # INFO:tensorflow:Step 200
        j = i + 1
        while j < len(text) and (text[j].isalnum() or text[j] in "_."):
            j += 1
        i = j + 1 if text.startswith(":", j) and j > i + 1 else i + 1
    return _logger_name_end(text, i), level


def _logger_name_end(text: str, i: int) -> int:
    """After a level: skip ` - ` / ` | ` and one logger name followed by another such separator."""
    i = _skip_separators(text, i)
    j = i
    while j < len(text) and (text[j].isalnum() or text[j] in "_."):
        j += 1
    if j > i and text[j : j + 3] in (" - ", " | "):
        return _skip_separators(text, j)
    return i


def _skip_separators(text: str, i: int) -> int:
    while i < len(text) and (text[i] in " \t|>" or text.startswith("- ", i)):
        i += 1
    return i


def _file_line_end(text: str) -> int:
    """End of `model_lib_v2.py:652]` or `lr_scheduler.py:139:` near the start; 0 if none."""
    at = text.find(".py:", 0, _FILE_WINDOW)
    if at < 0:
        return 0
    i = at + 4
    j = i
    while j < len(text) and text[j].isdigit():
        j += 1
    if j == i:
        return 0
    if text.startswith(":", j) and j + 1 < len(text) and text[j + 1].isalpha():
        j += 1
        while j < len(text) and (text[j].isalnum() or text[j] == "_"):
            j += 1
    if text.startswith("]", j) or text.startswith(":", j):
        j += 1
    return j


def strip_prefix(line: str) -> str:
    """The line without its log prefix (and its ANSI codes)."""
    return read_prefix(line)[0]


def read_prefix(line: str) -> tuple[str, str]:
    """The line without its log prefix (and its ANSI codes), and the level the prefix names.

    The level is one of LEVELS (`WARN` read as `WARNING`; glog's `W0912 ...` too), or ''.
    """
    text = strip_ansi(line)
    level = _GLOG_LEVELS.get(text[:1], "") if text[1:5].isdigit() and text[5:6] == " " else ""
    text = text[_file_line_end(text) :]
    end, named = _level_end(text)
    text = text[end:]
    level = "WARNING" if named == "WARN" else named or level
    for _ in range(12):
        stripped = text.lstrip(" \t")
        if stripped.startswith(_STREAMS):
            text = stripped[len(_STREAMS[0]) :]
            continue
        if stripped.startswith("["):
            close = stripped.find("]", 1, _FILE_WINDOW)
            if close > 0 and _is_prefix_bracket(stripped[1:close]):
                text = stripped[close + 1 :]
                if text.startswith(":"):
                    text = text[1:]
                continue
        end = _date_time_end(stripped)
        if end:
            text = stripped[end:]
            continue
        if stripped.startswith(("- ", "| ", ">> ")):
            text = stripped[2:]
            continue
        break
    return text, level
