"""Which files are records, their sources' words, and the series name a record's tag gets.

One rule names a metric whatever wrote it, so that a structured record and stdout's copy
of it land on one series: HF's TensorBoard tags `train/loss` and `eval/loss` are the
`loss` and `eval_loss` its log dicts (stdout, trainer_state.json) print; other names
(Lightning's, the user's own) are read as stdout's are (`monitoring.reading.names`).
"""

from fnmatch import fnmatchcase

from monitoring.reading.names import MAX_NAME_LENGTH, normalise_word

TFEVENTS = "tfevents"
CSV = "csv"
TRAINER_STATE = "trainer_state"
# The file names discovery looks for, and what each is.
PATTERNS = {
    "events.out.tfevents.*": TFEVENTS,
    "metrics.csv": CSV,
    "trainer_state.json": TRAINER_STATE,
}
# What the page says a series came from.
SOURCES = {
    TFEVENTS: "TensorBoard events",
    CSV: "metrics.csv",
    TRAINER_STATE: "trainer_state.json",
}
# The order sources win in when two give one metric (events are written as the run goes).
PRIORITY = (TFEVENTS, CSV, TRAINER_STATE)
# A leading namespace that says which loop: training's is the plain name, the others prefix it.
_DROPPED = frozenset({"train", "training"})
_PREFIXED = frozenset({"eval", "val", "valid", "validation", "test", "predict"})


def record_kind(name: str) -> str | None:
    """What a file is, by its base name (None: not a record)."""
    for pattern, kind in PATTERNS.items():
        if fnmatchcase(name, pattern):
            return kind
    return None


def record_name(tag: str) -> str:
    """The series name of a record's tag; a stdout name maps to itself or its record's."""
    head, slash, rest = tag.strip().partition("/")
    # The namespace comes off before the words are read (`train/epoch` is no rate per epoch).
    if slash and rest and head.lower() in _DROPPED:
        name = normalise_word(rest)
    elif slash and rest and head.lower() in _PREFIXED:
        name = f"{head.lower()}_{normalise_word(rest)}"
    else:
        name = normalise_word(tag.strip())
    return name[:MAX_NAME_LENGTH]
