"""A stateful reader of training stdout: lines in, (step, values) points out.

It keeps what must survive between lines and between polls in `ReaderState`
(monitoring.reading.state), a small JSON-able dict. Consecutive points of one step
merge (later values win); a line without a step attaches to the latest step when it
reads as a metrics line (monitoring.reading.attach); `\\r` redraws are read segment by segment.

A bar lags: tqdm redraws at most every `mininterval`, so the count drawn last can be
behind the step. A record written with tqdm.write (the bar cleared, the record, the bar
refreshed at once at its current count: `monitoring.reading.lines` gives the clear and the first
redraw of the next line) takes the step of that refresh when it is ahead of the count
drawn before; the record is held until the next text says (in the state between polls).
When stdout held the record back, the clear and the refresh came with nothing between:
that refresh is the record's place, and the records that come later take the places in
order (`_slot`). Only the training loop's progress is a step (`_training`); a burst of
step-less records with no places is left out, not collapsed (`_first_at_step`).
Pure: no Django, no I/O. Linear in the length of the text.
"""

from __future__ import annotations

import zlib

from monitoring.reading.attach import configuration_echo, metrics_line
from monitoring.reading.bars import bar_end, bar_start
from monitoring.reading.fields import LineFields, read_fields
from monitoring.reading.names import label_name
from monitoring.reading.numbers import is_rate
from monitoring.reading.point import Line, Point, Record
from monitoring.reading.postfix import repeated_dropped
from monitoring.reading.prefixes import read_prefix
from monitoring.reading.reports import error_report
from monitoring.reading.state import MAX_GIVEN, MAX_SHAPES, MAX_SLOTS, ReaderState, Value
from monitoring.reading.steps import NOT_TRAINING, Steps, resolve
from monitoring.reading.table import is_header, row_fields
from monitoring.reading.tokens import NUMBER, tokenize

# A metric line is well under this; a longer one is read up to its last separator before
# the cap (a token is never cut), which bounds the cost of any line.
MAX_READ_CHARS = 1024
# A line redrawn more often than this: only its newest redraws are read (a terminal shows one).
MAX_SEGMENTS = 8
# The glyph Rich (and Keras 3) draw a bar with.
RICH_BAR = "━"
# A record at one of these levels attaches to no step printed at another level.
SEVERE_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL", "FATAL"})
_CUT_AT = " ,|\t"


def _bounded(segment: str) -> str:
    if len(segment) <= MAX_READ_CHARS:
        return segment
    head = segment[:MAX_READ_CHARS]
    cut = max(head.rfind(c) for c in _CUT_AT)
    return head[:cut] if cut > 0 else ""


class MetricReader:
    """Feed it lines (with their `\\r` redraws); take the finished points."""

    def __init__(self, state: ReaderState | None = None, *, last_step: int | None = None) -> None:
        self.state = state or ReaderState()
        if self.state.counted is None and self.state.step is None:
            self.state.counted = last_step
        self.pending: Point | None = None
        if self.state.held and self.state.block is not None:
            self.pending = Point(-1, self.state.held, counted=True, block=self.state.block)
        self.state.held = {}
        self.record: Record | None = None
        state = self.state
        if state.record_step is not None and state.record_bar is not None and state.record:
            self.record = Record(Point(state.record_step, dict(state.record)), state.record_bar)
        state.record, state.record_step, state.record_bar = {}, None, None
        self.done: list[Point] = []

    # --- lines ------------------------------------------------------------------------

    def feed(
        self,
        line: str,
        *,
        user_step: int | None = None,
        user_values: dict[str, Value] | None = None,
    ) -> None:
        """One line as printed; each `\\r` segment is a redraw, read in turn."""
        segments = line.rstrip("\n").split("\r")[-MAX_SEGMENTS:]
        for at, segment in enumerate(segments):
            if segment.strip():
                self.read(segment, user_step=user_step, user_values=user_values)
            elif segment and at + 1 < len(segments):
                self._clear()  # a blank redraw (`monitoring.reading.lines.CLEAR`)

    def _clear(self) -> None:
        self._release(None, None)
        state = self.state
        state.cleared = True
        if state.drawn is None:  # text came since (a warning, a bar drawn below): still it
            state.drawn = state.bar

    def _fields(self, text: str) -> LineFields | None:
        state = self.state
        bar = bar_start(text)
        desc = text[:bar].rstrip(" :") if bar >= 0 else text
        columns = desc.split()
        if is_header(columns, desc):
            state.header = [label_name([c])[0] for c in columns]
            return None
        rich = text.find(RICH_BAR) if bar < 0 else -1  # `Validation ━━━━ 4/4 0:00:00 • ...`
        described = columns if bar >= 0 else text[:rich].split() if rich >= 0 else []
        if any(w.lower().startswith(NOT_TRAINING) for w in described):
            return None  # `Validating: 68%|...`, `Map: 100%|...`: not a training step
        if state.header and len(columns) == len(state.header):
            row = row_fields(state.header, columns)
            if len(row) * 2 >= len(columns):
                rest = read_fields(tokenize(text[bar:])) if bar >= 0 else LineFields()
                offset = len(row)
                return LineFields(
                    row + rest.fields,
                    offset + rest.bar if rest.bar is not None else None,
                    row=True,
                )
        state.header = []
        if text.strip().startswith("***") and text.strip().endswith("***"):
            state.blocks += 1
            state.block = state.blocks
            return None
        if state.block is not None and "=" not in text:
            state.block = None
        return read_fields(tokenize(text))

    def read(
        self,
        segment: str,
        *,
        user_step: int | None = None,
        user_values: dict[str, Value] | None = None,
    ) -> None:
        raw = _bounded(segment)
        report = error_report(raw)
        if report:  # what came before it on the line is read (a bar the error ran into)
            raw = raw[: report.start()]
        end = bar_end(raw)
        self._read(raw[:end], user_step, user_values or {})
        if raw[end:].strip():  # printed onto the bar: a line of its own
            self._read(raw[end:], None, {})
        if report:
            self.state.after_error = True  # nothing step-less attaches until the next step

    def _read(self, raw: str, user_step: int | None, user_values: dict[str, Value]) -> None:
        state = self.state
        cleared, over_bar = state.cleared, state.drawn if state.cleared else None
        state.drawn, state.cleared = None, False
        text, level = read_prefix(raw)
        found = self._fields(text) if text.strip() else None
        if found is None:
            self._release(None, None)
            return
        # Lightning counts epochs from 0: its logger's v_num, and its Rich bar `Epoch 2/2 ━━━`
        # (`Epoch {current_epoch}/{max_epochs - 1}`, the bar on the same line: Keras prints
        # its 1-based `Epoch 3/10` on a line of its own).
        zero_based = (
            "Epoch: [" in text
            or any(f.name == "v_num" for f in found.fields)
            or (RICH_BAR in text and text.lstrip().startswith("Epoch"))
        )
        steps = resolve(found.fields, found.bar, state.epochs, zero_based=zero_based)
        if steps.skip:
            self._release(None, None)
            return
        if steps.of is not None and user_step is None and not self._training(steps, found):
            self._release(None, None)  # another loop's progress: no step, and no rate of training
            return
        if found.bar is not None and steps.count == 0 and user_step is None:
            # A bar at 0 of N is its start or a reset for the next epoch (Lightning redraws
            # it at 0 under the old description first): no step is done, and its postfix
            # holds the values of the last step before.
            if steps.total is not None:
                state.total_steps = steps.total
            self._release(None, None)
            state.drawn = state.bar = steps.of  # a record written over it: the step before
            return
        if found.bar is not None:
            repeated_dropped(state.postfix, found, steps.values)
        if user_values:
            steps.values.update(user_values)
            steps.metric_fields += len(user_values)
        if user_step is not None:
            steps.step, steps.from_counter = user_step, True
        bar = steps.of if found.bar is not None and steps.step is not None else None
        if cleared and bar is not None and bar == state.loop and self.record is None:
            self._slot(steps.step or 0)  # refreshed after a clear with no record: it went elsewhere
        self._release(steps.step, bar)
        state.drawn = bar
        state.bar = bar if bar is not None else state.bar
        self._place(steps, Line(text, level, found, bool(user_values), over_bar))

    def _training(self, steps: Steps, found: LineFields) -> bool:
        """Whether an `i/N` progress is the training loop's: the first loop seen to advance is
        (an evaluation or prediction bar is drawn later, below it or between its redraws, with
        its own N); a progress of another N never becomes the step. Unless that first loop
        ran to its end with no value but its rate (preparing data, `tqdm(files)`): the next
        loop to advance is the training then."""
        state = self.state
        unused = state.loop_done and not state.loop_used and steps.of != state.loop
        if steps.count and (state.loop is None or unused):
            state.loop, state.loop_done, state.loop_used = steps.of, False, False
        if steps.of != state.loop:
            return state.loop is None
        state.loop_done = state.loop_done or steps.count == steps.of
        state.loop_used = state.loop_used or any(
            item.name in steps.values and item.name != "epoch" and not is_rate(item.unit)
            for item in found.fields
        )
        return True

    def _slot(self, step: int) -> None:
        """A record's place: tqdm.write cleared the bar, wrote the record to a stream that
        holds it (stdout, block-buffered when it is no terminal) and refreshed the bar at
        the step it was written at. The records come later, in order, in one burst."""
        slots = self.state.slots
        if len(slots) >= MAX_SLOTS:
            slots.clear()  # more records held back than any buffer holds: places unknown
            self.state.slots_lost = True
        elif not self.state.slots_lost:
            slots.append(step)

    def _release(self, step: int | None, bar: int | None) -> None:
        """Give the held record: at `step` when this text is a redraw of its bar (the
        refresh right after it) ahead of the step it was written at, else at that step."""
        record, self.record = self.record, None
        if record is None:
            return
        if bar == record.bar and step is not None and step > record.point.step:
            record.point.step = step
        self._add(record.point)

    def _attaches(self, steps: Steps, line: Line) -> bool:
        """Whether a step-less line's values belong to the latest step (`reading.attach`)."""
        state = self.state
        if line.user or line.found.row:
            return True
        if state.after_error or (line.level in SEVERE_LEVELS and line.level != state.level):
            return False  # a warning about the step is no value of it
        return metrics_line(
            line.found.tokens,
            [item.name for item in line.found.fields],  # nan ones too
            prose=line.found.prose,
            under_heading=state.heading and line.text[:1] in " \t",
        )

    def _place(self, steps: Steps, line: Line) -> None:
        state = self.state
        if steps.total is not None:
            state.total_steps = steps.total
        if steps.step is None and not steps.metric_fields:
            if steps.epoch is not None:
                state.epochs.epoch = steps.epoch  # `Epoch 3/10`: progress for the lines after it
            return
        if steps.step is None and steps.epoch is not None and not state.seen_counter:
            steps.step = steps.epoch  # a per-epoch summary: the epoch is the step
        if steps.step is not None:
            state.step, state.step_epoch = steps.step, steps.epoch
            state.seen_counter = state.seen_counter or steps.from_counter
            state.heading = not steps.metric_fields and line.text.rstrip().endswith(":")
            state.after_error = False
            state.level = line.level
            state.shapes, state.burst = [], False
        if not steps.metric_fields:
            return
        if steps.step is None and configuration_echo(
            line.found.tokens, [(f.name, f.value) for f in line.found.fields]
        ):
            return  # settings, not a record
        written = line.over_bar is not None  # tqdm.write: the bar's refresh comes next
        if steps.step is None and (state.step is not None or written) and state.block is None:
            if not self._attaches(steps, line):
                state.heading = False
                return
            state.loop_used = True
            if state.step_epoch is not None:
                steps.values.setdefault("epoch", state.step_epoch)
            if line.over_bar is not None:  # before any step: at 0 unless the refresh says
                self.record = Record(Point(state.step or 0, steps.values), line.over_bar)
                return
            if state.slots:
                steps.step = state.slots.pop(0)
            elif not self._first_at_step(steps, line):
                return
            else:
                steps.step = state.step
        if steps.step is None:
            self._add(Point(-1, steps.values, counted=True, block=state.block))
        else:
            self._add(Point(steps.step, steps.values))

    def _first_at_step(self, steps: Steps, line: Line) -> bool:
        """Whether a step-less record is the first of its shape since the latest step.

        A second one of the same shape (its text but for the numbers), with other values
        and no progress between, is a burst (output held back, then written at once) with
        no places: its records' steps are unknown, so none of them is charted (the one
        before is taken back from the step while it is still open) and `unplaced` counts
        them, rather than the last one silently winning."""
        state, pending = self.state, self.pending
        shape = zlib.crc32(
            "".join("#" if t.kind == NUMBER else t.text for t in line.found.tokens).encode()
        )
        if not state.burst and shape not in state.shapes:
            state.shapes = [*state.shapes, shape][:MAX_SHAPES]
            return True
        open_step = pending is not None and (pending.step, pending.counted) == (state.step, False)
        if not state.burst and pending is not None and open_step:
            if all(pending.values.get(name) == v for name, v in steps.values.items()):
                return True  # the same record again (every rank prints it): nothing to choose
            for name in steps.values:
                pending.values.pop(name, None)
            state.unplaced += 1
        state.burst = True
        state.unplaced += 1
        return False

    def _add(self, point: Point) -> None:
        pending = self.pending
        if pending is not None and (
            (not point.counted and not pending.counted and pending.step == point.step)
            or (
                point.counted
                and pending.counted
                and point.block is not None
                and point.block == pending.block
            )
        ):
            pending.values.update(point.values)
            return
        self._flush()
        self.pending = point

    def _flush(self) -> None:
        point, self.pending = self.pending, None
        if point is None:
            return
        if point.counted:
            if not any("loss" in name for name in point.values):
                return  # no step and no loss: configuration echoes, NCCL settings
            base = self.state.counted
            point.step = 0 if base is None else base + 1
            self.state.counted = point.step
        else:
            self._once(point)
        if point.values or not point.counted:
            self.done.append(point)  # a step whose values were all nan is still a point

    def _once(self, point: Point) -> None:
        """A step whose lines came in two polls: values the first poll gave are not given again.

        (Within one poll the step's lines merge into one point before it is given.)
        """
        state = self.state
        if state.given_step == point.step:
            for name in [n for n, v in point.values.items() if state.given.get(n) == v]:
                del point.values[name]
            state.given.update(list(point.values.items())[: MAX_GIVEN - len(state.given)])
        else:
            state.given_step = point.step
            state.given = dict(list(point.values.items())[:MAX_GIVEN])

    # --- results ----------------------------------------------------------------------

    def finish(self, *, more_to_come: bool = False) -> list[Point]:
        """Every point read so far, the last one included; the reader can go on after.

        With more_to_come (the file may grow), a `***** train metrics *****` block that may
        go on in the next poll stays in the state instead (its point is given when it
        ends), and so does a record whose bar's refresh may come.
        """
        state, record = self.state, self.record
        if more_to_come and record is not None:
            state.record = dict(list(record.point.values.items())[:MAX_GIVEN])
            state.record_step, state.record_bar = record.point.step, record.bar
            self.record = None
        self._release(None, None)
        pending = self.pending
        if (
            more_to_come
            and pending is not None
            and pending.counted
            and pending.block is not None
            and pending.block == self.state.block
        ):
            self.state.held = dict(list(pending.values.items())[:MAX_GIVEN])
            self.pending = None
        self._flush()
        done, self.done = self.done, []
        return done

    @property
    def total_steps(self) -> int | None:
        return self.state.total_steps
