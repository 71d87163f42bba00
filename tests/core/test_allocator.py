"""glibc's allocator tuned by the `lengthwise` command (lengthwise.core.allocator), and only there."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lengthwise.core import allocator
from lengthwise.core.allocator import MMAP_THRESHOLD, OPT_OUT, TRIM_THRESHOLD, glibc_version, tune_allocator

GLIBC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES", OPT_OUT)

# Runs the command's entry point (`lengthwise --version`), then asks glibc where a 24 MiB block comes from
# (mallinfo2: hblkhd counts mmap'd bytes) and whether the heap keeps it once freed (arena).
PROBE = r"""
import ctypes, json, os, sys

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
from lengthwise.cli import main
sys.argv = ["lengthwise", "--version"]
try:
    main()
except SystemExit:
    pass
before = libc.mallinfo2()
block = libc.malloc(24 * 1024 * 1024)
ctypes.memset(block, 1, 24 * 1024 * 1024)
during = libc.mallinfo2()
libc.free(block)
after = libc.mallinfo2()
print(json.dumps({"mmapped": during.hblkhd - before.hblkhd >= 24 * 1024 * 1024,
                  "kept": after.arena - before.arena >= 16 * 1024 * 1024,  # the heap's free top was reused
                  "variable": os.environ.get("MALLOC_MMAP_THRESHOLD_")}))
"""

needs_glibc = pytest.mark.skipif(glibc_version() is None, reason="the allocator tuning is for glibc on Linux")


def _probe(**given: str) -> dict[str, object]:
    """The PROBE's answer in a fresh interpreter with only `given` of the allocator's variables set."""
    env = {name: value for name, value in os.environ.items() if name not in GLIBC_VARIABLES}
    env.update(given)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_glibc
def test_the_command_keeps_freed_memory_in_the_process() -> None:
    """By default a 24 MiB block comes from the heap and stays there when freed; workers get the variables."""
    assert _probe() == {"mmapped": False, "kept": True, "variable": str(MMAP_THRESHOLD)}


@needs_glibc
def test_the_opt_out_leaves_glibc_alone() -> None:
    """LENGTHWISE_MALLOC_TUNING=0: glibc's own threshold mmaps the block, as without lengthwise."""
    assert _probe(**{OPT_OUT: "0"}) == {"mmapped": True, "kept": False, "variable": None}


@needs_glibc
def test_a_user_setting_is_kept_whole() -> None:
    """The user's mmap threshold alone: the block comes from the heap, but glibc's trim threshold still returns it
    (had lengthwise set its own trim threshold beside the user's, the heap would keep it)."""
    given = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD)}
    assert _probe(**given) == {"mmapped": False, "kept": False, "variable": str(MMAP_THRESHOLD)}
    assert _probe(MALLOC_TRIM_THRESHOLD_="131072")["mmapped"] is True


class Recorder:
    """A fake mallopt: records its calls, answers `accept`."""

    def __init__(self, accept: bool = True) -> None:
        self.calls: list[tuple[int, int]] = []
        self.accept = accept

    def __call__(self, parameter: int, value: int) -> bool:
        self.calls.append((parameter, value))
        return self.accept


def test_both_thresholds_are_set_on_glibc() -> None:
    environ: dict[str, str] = {}
    mallopt = Recorder()
    done = tune_allocator(environ, libc=lambda: "2.36", mallopt=mallopt)
    assert done.applied
    assert sorted(mallopt.calls) == [(-3, MMAP_THRESHOLD), (-1, TRIM_THRESHOLD)]
    assert environ == {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}
    assert done.settings == {"MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD, "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD}


@pytest.mark.parametrize(
    ("environ", "why"),
    [
        ({OPT_OUT: "0"}, OPT_OUT),
        ({OPT_OUT: "off"}, OPT_OUT),
        ({"MALLOC_TRIM_THRESHOLD_": "0"}, "MALLOC_TRIM_THRESHOLD_"),
        ({"MALLOC_MMAP_THRESHOLD_": "65536"}, "MALLOC_MMAP_THRESHOLD_"),
        ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}, "glibc.malloc.trim_threshold"),
    ],
)
def test_skipped_when_the_user_chose(environ: dict[str, str], why: str) -> None:
    mallopt = Recorder()
    given = dict(environ)
    done = tune_allocator(environ, libc=lambda: "2.36", mallopt=mallopt)
    assert not done.applied and why in done.reason
    assert mallopt.calls == [] and environ == given


def test_other_opt_out_values_still_tune() -> None:
    done = tune_allocator({OPT_OUT: "1"}, libc=lambda: "2.36", mallopt=Recorder())
    assert done.applied


def test_a_no_op_off_glibc() -> None:
    environ: dict[str, str] = {}
    mallopt = Recorder()
    done = tune_allocator(environ, libc=lambda: None, mallopt=mallopt)
    assert not done.applied and done.reason == "not glibc on Linux"
    assert mallopt.calls == [] and environ == {}


def test_refused_settings_are_not_passed_on() -> None:
    environ: dict[str, str] = {}
    done = tune_allocator(environ, libc=lambda: "2.36", mallopt=Recorder(accept=False))
    assert not done.applied and "refused" in done.reason and environ == {}


def test_glibc_version_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert glibc_version() is None


def test_the_command_line_entry_tunes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """`lengthwise.cli.main` calls tune_allocator before the command runs (here faked: pytest's process is kept)."""
    from lengthwise.cli import main

    calls: list[str] = []
    monkeypatch.setattr(allocator, "tune_allocator", lambda: calls.append("tuned"))
    monkeypatch.setattr(sys, "argv", ["lengthwise", "--version"])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code in (0, None) and calls == ["tuned"]


def test_importing_the_library_leaves_the_allocator_alone() -> None:
    """`import lengthwise` (and its command line's package) never runs the tuning: no variable appears."""
    env = {name: value for name, value in os.environ.items() if name not in GLIBC_VARIABLES}
    code = "import os, lengthwise, lengthwise.cli; print(os.environ.get('MALLOC_MMAP_THRESHOLD_'))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"
