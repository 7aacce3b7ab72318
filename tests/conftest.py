"""Suite-wide settings for running the tests in parallel (``make test`` uses
``pytest -n 2 --dist loadgroup``; see docs/testing.md).

* The SLURM tests share one local cluster (a session fixture that starts and stops the
  daemons) and fixed ports: they run on one worker, in one group.
* The tests of a module that share one of its module- or session-scoped fixtures (the
  trained model of test_math_e2e.py, the prepared corpus of test_wmt.py, ...) form one
  group too: otherwise each worker builds the fixture again.
* Under pytest-xdist each worker is one of two processes on a 2-core machine, so in-process
  torch uses one intra-op thread there (the e2e tests' child processes already do:
  OMP_NUM_THREADS=1); two workers with two threads each spin against each other.
"""
import os

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


@pytest.fixture(scope="session", autouse=True)
def cli_fork_server(tmp_path_factory):
    """tests/forkserver.py: the tests' fairseq/nesyseq command lines run as forks of one process
    that has imported torch and fairseq (NESYSEQ_TEST_FORKSERVER=0: plain processes)."""
    if os.environ.get("NESYSEQ_TEST_FORKSERVER", "1") == "0" or not hasattr(os, "fork"):
        yield
        return
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from tests import forkserver

    sock = os.path.join(tempfile.mkdtemp(prefix="nsfs"), "s")
    proc = subprocess.Popen([sys.executable, str(Path(forkserver.__file__)), "--serve", sock],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    if proc.stdout.readline().strip() != "ready":  # it says why on stderr; the suite runs without it
        proc.kill()
        proc.wait()
        yield
        return
    original = subprocess.Popen.__init__

    def popen_init(self, args, *a, **kw):
        new = None if kw.get("shell") or kw.get("executable") else forkserver.rewrite(args, sock)
        original(self, new if new is not None else args, *a, **kw)

    subprocess.Popen.__init__ = popen_init
    try:
        yield
    finally:
        subprocess.Popen.__init__ = original
        proc.kill()
        proc.wait()
