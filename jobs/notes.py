"""What a researcher may write on a run: a note, a few tags and a group, each checked here.

Pure: no database. The service (jobs.services.job_annotate) stores what these return; the
API, the job page and the Python client all go through it, so one set of limits holds.
"""

import re
from collections.abc import Iterable

from jobs.errors import JobError

NOTE_MAX = 4_000
TAGS_MAX = 10
TAG_MAX = 40
GROUP_MAX = 64
_LABEL = re.compile(r"^[A-Za-z0-9._-]+$")
LABEL_CHARS = "letters, digits, '-', '_' and '.'"


def clean_note(note: str) -> str:
    """The note without surrounding blank space, or a JobError naming `note`."""
    note = note.replace("\r\n", "\n").strip()  # a browser's line ends count once
    if len(note) > NOTE_MAX:
        raise _refused("note", f"Keep the note to {NOTE_MAX:,} characters (it has {len(note):,}).")
    return note


def clean_tags(tags: Iterable[str]) -> list[str]:
    """The tags, lower-cased, each once, in the order given; a JobError naming `tags`.

    Lower case makes `Baseline` and `baseline` one tag, so a filter finds both.
    """
    cleaned: list[str] = []
    for raw in tags:
        tag = raw.strip().lower()
        if not tag:
            continue
        if not _LABEL.match(tag):
            raise _refused("tags", f"Tag {raw.strip()[:TAG_MAX]!r}: use only {LABEL_CHARS}.")
        if len(tag) > TAG_MAX:
            raise _refused("tags", f"Tag {tag[:TAG_MAX]}...: keep a tag to {TAG_MAX} characters.")
        if tag not in cleaned:
            cleaned.append(tag)
    if len(cleaned) > TAGS_MAX:
        raise _refused("tags", f"Give at most {TAGS_MAX} tags (there are {len(cleaned)}).")
    return cleaned


def tags_from_text(text: str) -> list[str]:
    """Tags as a person types them: separated by commas or spaces."""
    return [t for t in re.split(r"[,\s]+", text) if t]


def clean_group(group: str) -> str:
    """The group label (kept as typed), or a JobError naming `group`."""
    group = group.strip()
    if group and not _LABEL.match(group):
        raise _refused("group", f"Group {group[:GROUP_MAX]!r}: use only {LABEL_CHARS}.")
    if len(group) > GROUP_MAX:
        raise _refused("group", f"Keep the group to {GROUP_MAX} characters.")
    return group


def is_label(text: str) -> bool:
    """Whether the text could be a tag or group (what a filter may look for)."""
    return bool(_LABEL.match(text))


def _refused(field: str, message: str) -> JobError:
    return JobError(message, errors={field: [message]})
