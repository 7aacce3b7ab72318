"""Suite-wide settings for running the tests in parallel (``make test`` uses
``pytest -n 2 --dist loadgroup``; see docs/testing.md).

* The SLURM tests share one local cluster (a session fixture that starts and stops the
  daemons) and fixed ports: they run on one worker, in one group.
* Under pytest-xdist each worker is one of two processes on a 2-core machine, so in-process
  torch uses one intra-op thread there (the e2e tests' child processes already do:
  OMP_NUM_THREADS=1); two workers with two threads each spin against each other.
"""
import os

import pytest

SERIAL_GROUPS = {"test_slurm.py": "slurm"}


def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        group = SERIAL_GROUPS.get(item.path.name)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
