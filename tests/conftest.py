"""Suite-wide settings for running the tests in parallel (``make test`` uses
``pytest -n 3 --dist loadgroup``; see docs/testing.md).

* The SLURM tests share one local cluster (a session fixture that starts and stops the
  daemons) and fixed ports: they run on one worker, in one group.
* The tests of a module that share one of its module- or session-scoped fixtures (the
  trained model of test_math_e2e.py, the prepared corpus of test_wmt.py, ...) form one
  group too: otherwise each worker builds the fixture again.
* Under pytest-xdist each worker is one of three processes on a 2-core machine, so in-process
  torch uses one intra-op thread there (the e2e tests' child processes already do:
  OMP_NUM_THREADS=1); workers with several threads each spin against each other.
"""
import io
import os
import sys
import traceback
import warnings

import pytest

SERIAL_GROUPS = {"test_slurm.py": "slurm"}


def _shares_a_module_fixture(item) -> bool:
    """Whether the test uses a module- or session-scoped fixture of its own module (a trained
    model, prepared data): xdist would build it once on every worker that runs such a test."""
    infos = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        defs = infos.name2fixturedefs.get(name) if infos else None
        if defs and defs[-1].scope in ("module", "session") and \
                getattr(defs[-1].func, "__module__", None) == item.module.__name__:
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Marks the groups. tryfirst: xdist's worker turns each item's ``xdist_group`` mark into a
    ``@group`` suffix of its node id in its own modifyitems hook; a hook of ours that ran after it
    (pluggy calls the conftest's plain hook later) added marks nobody read, and every group was
    split over both workers (docs/testing.md)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        group = SERIAL_GROUPS.get(item.path.name)
        if group is None and _shares_a_module_fixture(item):
            group = item.path.name  # the users of a shared fixture stay on one worker
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # the end-to-end runs first (a stable sort): xdist hands the rest out as workers free up, so
    # the last tests to finish are short ones and neither core waits long on the other at the end
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


_LOST_GROUPS = pytest.StashKey[list]()     # node ids of grouped tests whose id has no @group


def pytest_collection_finish(session):
    """Under ``--dist loadgroup``, notes grouped tests whose group did not reach xdist: its
    scheduler sees a group only as the ``@group`` suffix of a node id, which pytest 9.2 no longer
    lets a plugin write (pytest-dev/pytest-xdist#1386). Those tests would silently run on both
    workers (the SLURM tests would start two clusters at once); pytest_runtest_setup fails them."""
    config = session.config
    if not os.environ.get("PYTEST_XDIST_WORKER") or not config.getvalue("loadgroup"):
        return
    config.stash[_LOST_GROUPS] = [item.nodeid for item in session.items
                                  if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # before any fixture is set up (a worker's UsageError would only show as an xdist crash)
    lost = item.config.stash.get(_LOST_GROUPS, [])
    if lost:
        pytest.fail(f"--dist loadgroup: {len(lost)} grouped tests lost their group (e.g. "
                    f"{lost[0]}), so xdist would split them over the workers; pytest >= 9.2 "
                    "does not let xdist tag node ids (pytest-dev/pytest-xdist#1386): install "
                    "pytest<9.2 as setup.cfg pins it, or run without -n", pytrace=False)


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
    _guard_capture_files(config)


class GuardedCaptureFile(io.FileIO):
    """The file under pytest's global stdout/stderr capture (``sys.stdout`` between ``capsys``
    uses). Three fresh-clone CI runs went red when something closed it in the middle of a test
    on one xdist worker: "I/O operation on closed file" there, then at the setup of every later
    test on that worker (docs/testing.md, "The capture flake"). A close from anyone but pytest's
    capture is refused, and its stack is kept for a warning at that test's teardown."""

    foreign_closes: list = []

    def close(self):
        try:
            caller = sys._getframe(1)
        except ValueError:              # no Python caller (interpreter shutdown)
            caller = None
        if caller is None or self.closed or \
                caller.f_code.co_filename.endswith(os.path.join("_pytest", "capture.py")):
            return super().close()
        self.foreign_closes.append("".join(traceback.format_stack(caller)))


def _guard_capture_files(config) -> None:
    """Puts pytest's global fd-capture files under ``GuardedCaptureFile`` objects: the same open
    file (a dup of its descriptor), so fd 1/2 and what was written stay as they are."""
    capman = config.pluginmanager.getplugin("capturemanager")
    capturing = getattr(capman, "_global_capturing", None)
    for cap in (getattr(capturing, "out", None), getattr(capturing, "err", None)):
        old = getattr(cap, "tmpfile", None)
        if type(cap).__name__ != "FDCapture" or not isinstance(old, io.TextIOWrapper) or \
                isinstance(old.buffer, GuardedCaptureFile):
            continue                    # -s / --capture=sys, or already guarded
        new = type(old)(GuardedCaptureFile(os.dup(old.fileno()), "rb+"), encoding="utf-8",
                        errors="replace", newline="", write_through=True)
        cap.tmpfile = new
        sys_capture = getattr(cap, "syscapture", None)
        if getattr(sys_capture, "tmpfile", None) is old:
            sys_capture.tmpfile = new
            if getattr(sys, sys_capture.name, None) is old:
                setattr(sys, sys_capture.name, new)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    while GuardedCaptureFile.foreign_closes:
        stack = GuardedCaptureFile.foreign_closes.pop(0)
        warnings.warn(pytest.PytestWarning(f"{item.nodeid}: something closed pytest's capture file "
                                           f"(refused by tests/conftest.py); it was closed from:\n{stack}"))


@pytest.fixture(scope="session", autouse=True)
def cli_fork_server(tmp_path_factory):
    """tests/forkserver.py: the fairseq/nesyseq command lines of the whole process tree (a test's
    commands, a launcher's stages, the local cluster's jobs) run as forks of one process that has
    imported torch and fairseq (NESYSEQ_TEST_FORKSERVER=0: plain processes)."""
    if os.environ.get("NESYSEQ_TEST_FORKSERVER", "1") == "0" or not hasattr(os, "fork"):
        yield
        return
    import subprocess
    import sysconfig
    import tempfile
    from pathlib import Path

    from tests import forkserver

    hook = Path(sysconfig.get_paths()["purelib"]) / "nesyseq-test-forkserver.pth"
    if not hook.is_file():
        warnings.warn(pytest.PytestWarning(f"{hook} is missing (make venv writes it): every command runs as a "
                                           "plain process, which is correct but several times slower"))
        yield
        return
    sock = os.path.join(tempfile.mkdtemp(prefix="nsfs"), "s")
    env = {k: v for k, v in os.environ.items() if k != forkserver.SOCK_ENV}
    proc = subprocess.Popen([sys.executable, str(Path(forkserver.__file__)), "--serve", sock], env=env,
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    if proc.stdout.readline().strip() != "ready":  # it says why on stderr; the suite runs without it
        proc.kill()
        proc.wait()
        yield
        return
    old = os.environ.get(forkserver.SOCK_ENV)
    os.environ[forkserver.SOCK_ENV] = sock
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(forkserver.SOCK_ENV, None)
        else:
            os.environ[forkserver.SOCK_ENV] = old
        proc.kill()
        proc.wait()
