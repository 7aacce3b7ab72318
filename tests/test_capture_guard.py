"""tests/conftest.py's guard on pytest's global capture file: a foreign close is refused and
reported, so one stray close no longer fails every later test on the worker."""
import io
import sys

import pytest


def _fd_capture(request):
    capman = request.config.pluginmanager.getplugin("capturemanager")
    out = getattr(getattr(capman, "_global_capturing", None), "out", None)
    return out if type(out).__name__ == "FDCapture" else None


def test_a_foreign_close_is_refused_and_recorded(request):
    cap = _fd_capture(request)
    if cap is None:
        pytest.skip("no fd capture (-s or --capture=sys)")
    guarded = type(sys.stdout.buffer)   # the conftest's class (pytest imports conftest.py under its own name)
    assert sys.stdout is cap.tmpfile and guarded.__name__ == "GuardedCaptureFile"
    before = len(guarded.foreign_closes)
    wrapper = io.TextIOWrapper(sys.stdout.buffer)
    wrapper.close()                                 # refused: the wrapper stays open ...
    del wrapper                                     # ... so its finalizer closes again (a GC'd wrapper)
    sys.stdout.close()
    assert not sys.stdout.closed
    print("still captured")                         # would raise "I/O operation on closed file"
    closes = guarded.foreign_closes[before:]
    assert len(closes) == 3 and all("test_capture_guard.py" in c for c in closes)
    del guarded.foreign_closes[before:]   # expected here: no warning at teardown
