"""The progress of a long job on stderr: tqdm's bar on a terminal; elsewhere (a log file, ``nohup``, a pipe) a plain
line at most every ``LENGTHWISE_PROGRESS_INTERVAL`` seconds (30 by default) and a last one when the job ends.

A line reads ``encode: 400/1000 documents (40%), 1,234 windows, 05:00 elapsed, 07:30 left, 1.33 documents/s``; the
last one says ``done`` (or ``stopped``, when the job raised) after the name. The lines are tqdm's own text
(`tqdm.format_meter`: the counts, the average rate, the time left) written one per line instead of redrawn in place,
so a log holds readable lines and no carriage returns.

Example:
    >>> with ProgressLines("loading windows into Milvus", unit="windows") as lines:  # doctest: +SKIP
    ...     load_into_milvus(index, "out/milvus.db", "scifact", on_progress=lines.advance)
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from tqdm.std import tqdm

from lengthwise.core.errors import SettingError

__all__ = [
    "INTERVAL",
    "INTERVAL_VARIABLE",
    "ProgressLines",
    "ProgressMode",
    "ProgressStages",
    "begin_stage",
    "on_terminal",
    "progress_bar",
    "progress_interval",
    "progress_mode",
    "st_progress_lines",
]

INTERVAL = 30.0  # seconds between two lines off a terminal, at most
INTERVAL_VARIABLE = "LENGTHWISE_PROGRESS_INTERVAL"
ProgressMode = Literal["bar", "lines"]  # None: no progress at all
_LINE = "{desc}: {n_fmt}/{total_fmt}{unit} ({percentage:.0f}%){postfix}, {elapsed} elapsed, {remaining} left, " + (
    "{rate_noinv_fmt}"
)


def progress_interval() -> float:
    """Seconds between two progress lines: ``LENGTHWISE_PROGRESS_INTERVAL`` when set (0: a line at every step),
    else `INTERVAL`.

    Raises:
        SettingError: On ``LENGTHWISE_PROGRESS_INTERVAL`` when it is not a number of seconds ≥ 0.
    """
    value = os.environ.get(INTERVAL_VARIABLE, "").strip()
    if not value:
        return INTERVAL
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # also NaN
        raise SettingError(INTERVAL_VARIABLE, value, "use a number of seconds ≥ 0, e.g. 30")
    return seconds


def on_terminal() -> bool:
    """True when stderr is a terminal, or in a Jupyter kernel (where `tqdm.auto` draws its bar as a widget)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return (isatty is not None and isatty()) or "ipykernel" in sys.modules


def progress_mode(show: bool, *, processes: int = 1) -> ProgressMode | None:
    """How a job shows its progress on this process's stderr: none unless `show`; a bar on a terminal for one
    process; lines otherwise (off a terminal, and from several processes at once, whose bars would overwrite
    each other)."""
    if not show:
        return None
    return "bar" if processes == 1 and on_terminal() else "lines"


class ProgressLines(tqdm):
    """A tqdm counter written as plain lines (see the module): one when it starts, then at most one per `interval`
    seconds as it is updated, and a last one when it closes.

    `total` and `initial` are in `unit` (plural: ``documents``, ``windows``); the rate counts from `initial`, so
    that work a resumed job had already done does not speed up its rate and time left. `advance(done, total)` is
    the ``on_progress`` callback of the library's long jobs. A context manager, as tqdm is.
    """

    monitor_interval = 0  # no monitor thread: a line is written only on an update, at most every `interval` s
    total: float | None
    desc: str

    def __init__(
        self,
        desc: str,
        total: int | None = None,
        *,
        unit: str = "documents",
        interval: float | None = None,
        initial: int = 0,
        file: Any = None,
    ) -> None:
        self.stopped = False
        interval = progress_interval() if interval is None else interval
        super().__init__(total=total, desc=desc, unit=f" {unit}", initial=initial, file=file or sys.stderr,
                         mininterval=interval, maxinterval=max(interval, 1.0), miniters=1, smoothing=0,
                         leave=False, bar_format=_LINE)  # fmt: skip

    def advance(self, done: int, total: int | None = None) -> None:
        """Set the count to `done` of `total` (the ``on_progress(done, total)`` of a library job)."""
        if total is not None and total != self.total:
            self.total = total
        self.update(done - self.n)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        """Write the line (tqdm's text for this counter) and a newline; tqdm's request to clear it is ignored."""
        if msg == "":
            return False
        text = re.sub(r", +", ", ", str(self) if msg is None else msg)  # tqdm pads a rate to 5 characters
        self.fp.write(f"{text}\n")
        self.fp.flush()
        return True

    def close(self) -> None:
        """Write the last line, ``NAME done: …`` (``NAME stopped: …`` when the job raised), and close."""
        if not self.disable:
            self.desc = f"{self.desc} {'stopped' if self.stopped else 'done'}"
            self.display()
        super().close()

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> Any:
        self.stopped = exc_type is not None
        return super().__exit__(exc_type, exc_value, traceback)


def progress_bar(
    desc: str,
    total: int | None,
    mode: ProgressMode | None,
    *,
    unit: str = "documents",
    initial: int = 0,
    interval: float | None = None,
) -> tqdm:
    """A counter for one job in `mode` (`progress_mode`): tqdm's bar (`tqdm.auto`), `ProgressLines`, or, for None,
    a disabled tqdm that shows nothing."""
    if mode == "lines":
        return ProgressLines(desc, total, unit=unit, interval=interval, initial=initial)
    from tqdm.auto import tqdm as auto

    return auto(total=total, desc=desc, unit=f" {unit}", initial=initial, disable=mode is None)


class ProgressStages:
    """The ``on_progress(done, total)`` of a job that counts several stages through one callback (an index build:
    its windows, then its documents' text), written as `ProgressLines`, one stage after another.

    The job names each stage as it starts (`begin_stage`); a stage it does not name keeps the name before it (the
    first: `name` and `unit`) and starts where the total changes or the count goes back. `close()` ends the last.
    """

    def __init__(self, name: str, unit: str, *, interval: float | None = None) -> None:
        self.name, self.unit, self.interval = name, unit, interval
        self.current: ProgressLines | None = None

    def begin(self, name: str, unit: str) -> None:
        """End the stage under way; the next count is stage `name`, in `unit`."""
        self.close()
        self.name, self.unit = name, unit

    def __call__(self, done: int, total: int) -> None:
        current = self.current
        if current is not None and (total != current.total or done < current.n):
            current.close()
            current = None
        if current is None:
            current = self.current = ProgressLines(self.name, total, unit=self.unit, interval=self.interval)
        current.advance(done, total)

    def close(self, *, stopped: bool = False) -> None:
        """End the stage under way (``stopped``: the job raised)."""
        if self.current is not None:
            self.current.stopped = stopped
            self.current.close()
            self.current = None


def begin_stage(on_progress: object, name: str, unit: str) -> None:
    """Tell a job's `on_progress` that stage `name` (counted in `unit`) starts, where it is a `ProgressStages`; a
    plain callback just goes on being called."""
    if isinstance(on_progress, ProgressStages):
        on_progress.begin(name, unit)


@contextmanager
def st_progress_lines(desc: str, total: int, batch_size: int) -> Iterator[None]:
    """While inside, a sentence-transformers model's ``encode`` (called with ``show_progress_bar=True``) counts its
    texts as `ProgressLines` instead of drawing its bar (which, off a terminal, fills a log with carriage returns).

    ``SentenceTransformer.encode`` has no progress callback, and cutting the texts into calls of our own would
    change which texts share a batch (the model sorts all of them by length), so a text's vector could move in its
    last bits. Its loop over batches runs on the ``trange`` its module imported; that name is swapped for one that
    advances these lines by each batch's texts, and put back on leaving. Where the module or name is missing (another
    sentence-transformers), the encode runs with no progress rather than fail."""
    module = sys.modules.get("sentence_transformers.sentence_transformer.model")
    original = getattr(module, "trange", None)
    if module is None or original is None:
        yield
        return
    with ProgressLines(desc, total, unit="texts") as lines:

        def counted(start: int, stop: int, step: int, **_: Any) -> Iterator[int]:
            for first in range(start, stop, step):
                yield first
                lines.update(min(step, stop - first))

        module.trange = counted  # type: ignore[attr-defined]
        try:
            yield
        finally:
            module.trange = original  # type: ignore[attr-defined]
