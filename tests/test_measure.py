"""benchmarks/_measure.py's p99 and peak memory: `p99_ms` is the 99th percentile of every timed call (numpy's
linear interpolation), read off a fake clock so the durations are known exactly; `peak_rss_bytes` is in bytes and
grows when the process touches 50 MB more than it ever held."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from benchmarks import _measure

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import numpy as np
from benchmarks._measure import peak_rss_bytes
before = peak_rss_bytes()
held = np.ones(50_000_000 // 8)  # 50 MB, every page written
print(before, peak_rss_bytes(), int(held.sum()))
"""
STARTER = "import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', sys.argv[1]]).returncode)"


def _clocked(monkeypatch: pytest.MonkeyPatch, durations_ms: list[float]) -> tuple[list[int], Callable[[int], None]]:
    """A fake `time.perf_counter` that only call n moves on, by `durations_ms[n]`, and that call."""
    now, called = [1_000.0], []

    def clock() -> float:
        return now[0]

    def call(n: int) -> None:
        called.append(n)
        now[0] += durations_ms[n] / 1000

    monkeypatch.setattr(time, "perf_counter", clock)  # the clock _measure reads (its `time` is this module)
    return called, call


def test_p99_is_the_99th_percentile_of_every_timed_call(monkeypatch: pytest.MonkeyPatch) -> None:
    durations = [float(d) for d in range(1, 101)]  # 1 … 100 ms, in a shuffled order
    random.Random(0).shuffle(durations)
    called, call = _clocked(monkeypatch, durations)
    p99 = _measure.p99_ms(call, 100)
    assert called == list(range(100))  # each call timed once, with its own n
    assert p99 == pytest.approx(99.01)  # rank 0.99 · 99 = 98.01: 99 ms + 0.01 · (100 − 99)
    assert p99 == pytest.approx(float(np.percentile(durations, 99)))
    called.clear()
    p50 = _measure.p50_ms(call, 100)
    assert p50 == pytest.approx(50.5) and p99 >= p50


def test_p99_sees_the_slow_tail_the_median_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    durations = [2.0] * 99 + [1_002.0]  # one call in a hundred is slow
    _, call = _clocked(monkeypatch, durations)
    assert _measure.p50_ms(call, 100) == pytest.approx(2.0)
    assert _measure.p99_ms(call, 100) == pytest.approx(12.0)  # 2 + 0.01 · 1000


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in kilobytes on Linux only")
def test_peak_rss_is_in_bytes_and_grows_with_50_mb_touched() -> None:
    with open("/proc/self/status") as status:
        resident = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) * 1024
    assert _measure.peak_rss_bytes() >= resident  # a peak, in bytes (not kilobytes)
    # Linux keeps ru_maxrss through fork and exec: a child of this large process starts at its resident size, so the
    # child that measures is started by a small Python instead
    done = subprocess.run([sys.executable, "-c", STARTER, CHILD], cwd=ROOT, capture_output=True, text=True, check=True)
    before, after, total = (int(word) for word in done.stdout.split())
    assert total == 50_000_000 // 8  # every page of the array written
    assert 40_000_000 <= after - before <= 100_000_000


def test_a_command_line_is_the_module_and_its_arguments_as_a_shell_reads_them() -> None:
    from benchmarks._measure import command_line

    line = command_line("benchmarks.serve.serve", ["INDEX", "--queries", "my queries.jsonl", "--clients", "32"])
    assert line == "python -m benchmarks.serve.serve INDEX --queries 'my queries.jsonl' --clients 32"
    import shlex

    assert shlex.split(line)[3:] == ["INDEX", "--queries", "my queries.jsonl", "--clients", "32"]


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/PID/status")
def test_a_commands_peak_is_its_own_not_its_parents_at_the_fork() -> None:
    """`os.wait4`'s ``ru_maxrss`` starts a child at its parent's resident size; `run_measured` reads the child's own
    high-water mark. Under a parent holding 300 MB, a child that touches 50 MB peaks well under 300 MB."""
    held = bytearray(300 * 2**20)
    held[::4096] = b"\x01" * len(held[::4096])  # every page of the parent touched
    child = "import time\nb = bytearray(50 * 2**20)\nb[::4096] = b'\\x01' * len(b[::4096])\ntime.sleep(0.3)"
    run = _measure.run_measured([sys.executable, "-c", child])
    assert run["returncode"] == 0 and run["wall_s"] > 0.3
    assert 50 * 2**20 <= run["peak_rss_bytes"] <= 150 * 2**20
    assert len(held) == 300 * 2**20
