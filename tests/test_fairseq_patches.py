"""plugins/patches: every patch checks the fairseq version it was written for, refuses another
with one line naming it unless forced, and nothing is patched by importing our packages."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nesyseq.plugins import patches
from nesyseq.plugins.patches import _version

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", patches.PATCHES)
def test_each_patch_refuses_an_untested_fairseq(name, monkeypatch):
    module = patches.patch_module(name)
    assert module.FAIRSEQ_VERSIONS and module.__name__.rpartition(".")[2] == name
    assert re.search(r"fairseq(_cli)?/[\w/]+\.py:\d+", module.__doc__ or ""), name   # names the bug's file:line
    monkeypatch.delenv(_version.FORCE_ENV, raising=False)
    monkeypatch.setattr(_version, "fairseq_version", lambda: "0.13.0")
    with pytest.raises(patches.UntestedFairseq) as err:
        module.apply()
    msg = str(err.value)
    assert f"'{name}'" in msg and "0.13.0" in msg and _version.FORCE_ENV in msg and "\n" not in msg
    monkeypatch.setenv(_version.FORCE_ENV, "1")
    module.apply()   # forced through (and idempotent: the pinned fairseq may be patched already)


def test_the_stop_at_best_hook_refuses_an_untested_fairseq(monkeypatch):
    """Not in PATCHES (nesyseq train installs it with its bound), but behind the same gate."""
    from types import SimpleNamespace

    from nesyseq.plugins.patches import stop_at_best
    assert "stop_at_best" not in patches.PATCHES
    assert re.search(r"fairseq(_cli)?/[\w/]+\.py:\d+", stop_at_best.__doc__)
    loop = SimpleNamespace(validate_and_save=lambda *a: ([1.0], False), train=lambda *a: ([1.0], False))
    monkeypatch.delenv(_version.FORCE_ENV, raising=False)
    monkeypatch.setattr(_version, "fairseq_version", lambda: "0.13.0")
    with pytest.raises(patches.UntestedFairseq, match="'stop_at_best'.*0.13.0"):
        stop_at_best.install(loop, SimpleNamespace(save_checkpoint=SimpleNamespace()), 0.5)
    assert loop.train(None, None, None, None) == ([1.0], False)        # untouched


def _python(code: str, env=None):
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **(env or {})))


def test_importing_plugins_or_an_evaluation_helper_patches_nothing():
    r = _python(
        "import nesyseq.plugins, nesyseq.plugins.checkpoint_safety, nesyseq.evaluations.math_eval, nesyseq.evaluations.qa_eval\n"
        "from fairseq.data import data_utils\n"
        "from fairseq.tasks.fairseq_task import FairseqTask\n"
        "from fairseq.file_io import PathManager\n"
        "from fairseq.distributed import utils as du\n"
        "fixed = [f for f in (data_utils.batch_by_size, FairseqTask.get_batch_iterator, PathManager.copy,\n"
        "                     du.call_main, du.infer_init_method) if getattr(f, '_nesyseq_fixed', False)]\n"
        "assert not fixed, fixed\n"
        "import nesyseq.user_dir\n"
        "assert getattr(data_utils.batch_by_size, '_nesyseq_fixed', False)\n"
        "assert getattr(du.infer_init_method, '_nesyseq_fixed', False)\n")
    assert r.returncode == 0, r.stderr[-2000:]


def test_user_dir_refuses_an_untested_fairseq_in_one_line():
    """One fresh interpreter: importing user_dir under fairseq 9.9.9 exits with one line (a
    SystemExit with a message and no context: Python prints just it and exits 1), with nothing
    but INFO lines on stderr before it; forced, the same import goes through."""
    code = ("import os, sys, fairseq\n"
            "fairseq.__version__ = '9.9.9'\n"
            "try:\n"
            "    import nesyseq.user_dir\n"
            "    sys.exit('imported without refusing')\n"
            "except SystemExit as e:\n"
            "    assert isinstance(e.code, str) and e.__suppress_context__, repr(e.code)\n"
            "    print(e.code)\n"
            "print('--- forced ---', file=sys.stderr, flush=True)\n"
            f"os.environ['{_version.FORCE_ENV}'] = '1'\n"
            "sys.modules.pop('nesyseq.user_dir', None)\n"
            "import nesyseq.user_dir\n"
            "print('forced: imported')\n")
    r = _python(code, env={_version.FORCE_ENV: ""})
    assert r.returncode == 0, r.stderr[-2000:]
    refused_err = r.stderr.split("--- forced ---")[0]
    assert [ln for ln in refused_err.splitlines() if ln.strip() and "INFO" not in ln] == [], r.stderr
    assert r.stdout.splitlines() == ["nesyseq: nesyseq patch 'batch_remainder' was written for fairseq 0.12.3, found "
                                     f"9.9.9; set {_version.FORCE_ENV}=1 to apply it anyway", "forced: imported"], r.stdout
