"""tools/gpu_lane.py (``make gpu-wheels`` / ``make test-gpu``): the parts a CPU machine can check.

The lane itself needs a GPU; here: which pins become wheels, which wheels get installed,
the commands it would run (--dry-run), how it reads pytest and fairseq-train output, and
the summary it writes.  Expected values are written out by hand from the inputs.
"""
import datetime as dt
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "gpu_lane.py"
_spec = importlib.util.spec_from_file_location("gpu_lane", SCRIPT)
lane = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lane)


def test_pins_become_wheels_except_what_the_gpu_machine_brings(tmp_path):
    c = tmp_path / "constraints.txt"
    c.write_text("# comment\nve-fairseq==0.12.3\ntorch==2.13.0\ntriton==3.9.0\nnvidia-cublas-cu12==12.8\n\n"
                 "torchaudio==2.11.0\nPyYAML==6.0.3  # trailing\n")
    assert lane.pinned(c) == ["ve-fairseq==0.12.3", "PyYAML==6.0.3"]
    c.write_text("numpy>=1.26\n")
    with pytest.raises(lane.LaneError, match=r"constraints.txt:1: 'numpy>=1.26' is not 'name==version'"):
        lane.pinned(c)


def test_the_repository_pins_download_fairseq_and_not_torch():
    reqs = lane.pinned(REPO / "constraints.txt")
    names = {r.split("==")[0].lower() for r in reqs}
    assert {"ve-fairseq", "hydra-core", "omegaconf", "antlr4-python3-runtime", "bitarray", "sacrebleu",
            "portalocker", "sentencepiece", "submitit", "cloudpickle", "mathematics-dataset", "pytest"} <= names
    assert not names & {"torch", "triton", "torchaudio"}


def test_only_missing_projects_are_installed():
    wheels = [Path(n) for n in ("ve_fairseq-0.12.3-cp312-cp312-manylinux_2_17_x86_64.whl",
                                "PyYAML-6.0.3-cp312-cp312-manylinux_2_17_x86_64.whl",
                                "sympy-1.14.0-py3-none-any.whl", "hydra_core-1.3.8-py3-none-any.whl")]
    got = lane.missing_wheels(wheels, {"sympy", "pyyaml"})
    assert [w.name for w in got] == ["hydra_core-1.3.8-py3-none-any.whl",
                                     "ve_fairseq-0.12.3-cp312-cp312-manylinux_2_17_x86_64.whl"]
    with pytest.raises(lane.LaneError, match="two wheels of pyyaml"):
        lane.missing_wheels(wheels + [Path("pyyaml-6.0.2-py3-none-any.whl")], set())
    with pytest.raises(lane.LaneError, match="not a wheel file name"):
        lane.missing_wheels([Path("numpy-1.26.4.tar.gz")], set())


def test_dry_run_prints_every_command_and_runs_nothing(tmp_path):
    work = tmp_path / "work"
    r = subprocess.run([sys.executable, str(SCRIPT), "run", "--dry-run", "--work", str(work),
                        "--site", str(tmp_path / "site")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "tests/test_trans_cuda.py" in out and "benchmarks/bench_trans.py" in out
    assert "benchmarks/bench_qa_split.py --device cuda" in out   # issue 23 part 5's GPU updates/s
    trains = [ln for ln in out.splitlines() if "fairseq_cli.train" in ln]
    archs = [ln.split("--arch ")[1].split()[0] for ln in trains]
    assert archs == ["tp_transformer_tiny", "folnet_tiny", "folnet_transformer_tiny", "memnet_babi", "stpr_small",
                     "tpru_tiny"]
    assert all("--cpu" not in ln and f"--max-update {lane.SMOKE_UPDATES}" in ln for ln in trains)
    assert f"export PYTHONPATH={tmp_path / 'site'}:{REPO}" in out
    assert not work.exists() and not (tmp_path / "site").exists()


def test_bad_options_are_one_line_errors(tmp_path):
    for args, msg in ((["--steps", "tests,gpu"], "--steps gpu: unknown"),
                      (["--families", "tpru,lstm"], "--families lstm: unknown")):
        r = subprocess.run([sys.executable, str(SCRIPT), "run", "--dry-run", *args], capture_output=True, text=True,
                           timeout=120)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("gpu_lane: ") and msg in lines[0]


@pytest.mark.slow  # the lane's child interpreter imports torch, triton and fairseq
def test_no_cuda_device_is_a_clear_error_before_anything_is_installed(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    r = subprocess.run([sys.executable, str(SCRIPT), "run", "--site", str(tmp_path / "site"), "--work",
                        str(tmp_path / "work")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "sees no CUDA device" in r.stderr
    assert not (tmp_path / "site").exists() and not (tmp_path / "work").exists()


def test_pytest_counts():
    assert lane.pytest_counts("....\n12 passed, 3 skipped, 1 warning in 4.20s\n") == {"passed": 12, "skipped": 3}
    assert lane.pytest_counts("x\n==== 1 failed, 2 passed, 2 errors in 0.5s ====") == {
        "failed": 1, "passed": 2, "error": 2}
    assert lane.pytest_counts("ImportError: no module named fairseq\n") == {}


LOG = """\
2026-01-01 00:00:00 | INFO | fairseq.utils | rank   0: capabilities =  9.0  ; total memory = 79.109 GB ; name = NVIDIA H100 80GB HBM3
2026-01-01 00:00:00 | INFO | fairseq_cli.train | training on 1 devices (GPUs/TPUs)
2026-01-01 00:00:01 | INFO | train_inner | epoch 001:      5 / 9 loss=4.5, ppl=22.6, wps=1000.5, ups=12.5, num_updates=5
2026-01-01 00:00:02 | INFO | train | epoch 001 | loss 4.102 | ppl 17.2 | wps 2100 | ups 20.25 | num_updates 9
2026-01-01 00:00:03 | INFO | train | epoch 004 | loss 2.75 | ppl 6.7 | wps 2300 | ups 22 | num_updates 30
2026-01-01 00:00:04 | INFO | fairseq_cli.train | done training in 3.9 seconds
"""


def test_train_figures_read_the_simple_log_format():
    f = lane.train_figures("python -m fairseq_cli.train data --arch x\n" + LOG)
    assert f == {"updates": 30, "loss_first": 4.5, "loss_last": 2.75, "ups": 22.0, "wps": 2300.0,
                 "train_seconds": 3.9, "on_gpu": True}
    assert lane.train_figures("python -m fairseq_cli.train data --cpu\n" + LOG)["on_gpu"] is False
    # on CPU fairseq also says "training on 1 devices (GPUs/TPUs)", but prints no CUDA environment
    cpu_log = "\n".join(ln for ln in LOG.splitlines() if "capabilities" not in ln)
    assert lane.train_figures("python -m fairseq_cli.train data\n" + cpu_log)["on_gpu"] is False


def test_summary_is_dated_complete_and_written_atomically(tmp_path):
    steps = lane.plan("py", tmp_path, ["tests", "smoke"], ["tpru"])
    tests = lane.Result(steps[0], 0, 61.0, "", counts={"passed": 40, "skipped": 2})
    prep = lane.Result(steps[1], 0, 3.0, "")
    smoke = lane.Result(steps[2], 0, 9.0, "", figures=lane.train_figures("x\n" + LOG))
    when = dt.datetime(2026, 11, 24, 20, 5, tzinfo=dt.timezone.utc)
    env = {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.13.0+cu128", "cuda": "12.8", "triton": "3.9.0"}
    text = lane.summary_markdown(env, [tests, prep, smoke], when)
    assert text.startswith("# GPU lane, 2026-11-24 20:05 UTC: all steps passed\n")
    assert "| gpu | NVIDIA H100 80GB HBM3 |" in text and "| cuda | 12.8 |" in text and "| driver | – |" in text
    assert "| tests | 40 | 0 | 2 | 0 | 61 | yes |" in text
    assert "| tpru | 30 | yes | 4.500 → 2.750 | 22.0 | 2300 | 3.9 | yes |" in text
    # a smoke run that stopped short, and failed tests, fail the lane and show their log
    short = lane.Result(steps[2], 0, 9.0, "the last lines", figures={**smoke.figures, "updates": 12})
    bad = lane.Result(steps[0], 1, 5.0, "E assert", counts={"passed": 3, "failed": 1})
    text = lane.summary_markdown(env, [bad, short], when)
    assert ": FAILED\n" in text.splitlines()[0] + "\n" and "### tests: exit 1" in text
    assert "### smoke:tpru: exit 0" in text and "the last lines" in text
    path = lane.summary_path(tmp_path / "docs", when, env["gpu"])
    assert path == tmp_path / "docs" / "gpu_runs" / "2026-11-24_2005_nvidia-h100-80gb-hbm3.md"
    lane.atomic_write_text(path, text)
    assert path.read_text() == text and [p.name for p in path.parent.iterdir()] == [path.name]


def test_loss_curves_are_read_and_compared():
    """The precision tests' yardstick (tests/test_precision_cuda.py): the logged train loss per
    update, and the largest relative gap to the fp32 curve."""
    log = ("2026 | INFO | train_inner | epoch 001:     20 / 14 loss=7.5, ppl=181, wps=9000, ups=9, num_updates=20\n"
           "2026 | INFO | train_inner | epoch 002:     40 / 14 loss=4, ppl=16, wps=9000, ups=9, num_updates=40\n"
           "2026 | INFO | train | epoch 002 | loss 4.1 | num_updates 40\n")
    ref = lane.loss_curve(log)
    assert ref == [(20, 7.5), (40, 4.0)]
    assert lane.curve_deviation(ref, ref, atol=0.05) == 0
    assert lane.curve_deviation(ref, [(20, 7.5), (40, 4.4)], atol=0.0) == pytest.approx(0.1)
    assert lane.curve_deviation(ref, [(20, 7.5)], atol=0.05) == float("inf")  # stopped or NaN


QA_SPLIT_OUT = """\
INFO:fairseq.tasks.text_to_speech:Please install tensorboardX: pip install tensorboardX
batch 32, up to 50 sentences (source length 297), 1 thread(s), device cuda, best of 3 x 50 updates
| model | row-by-row updates/s | vectorised updates/s | ratio |
|---|---|---|---|
| memnet | 46.7 | 150.9 | 3.23 |
/x/fairseq/utils.py:1: UserWarning: a library warning in the middle of the table
| stpr | 2.1 | 2.6 | 1.27 |
"""


def test_benchmark_tables_reach_the_summary(tmp_path):
    """The bench steps' figures are what a GPU session reports: each step's --markdown file (or,
    failing that, the last table it printed) must land in the dated summary, not only in logs."""
    table = lane.markdown_table(QA_SPLIT_OUT)
    assert table == ["| model | row-by-row updates/s | vectorised updates/s | ratio |", "|---|---|---|---|",
                     "| memnet | 46.7 | 150.9 | 3.23 |", "| stpr | 2.1 | 2.6 | 1.27 |"]
    two = "| a |\n|---|\n| 1 |\n\nper-kernel:\n| T | k |\n|---|---|\n| 512 | 3 |\n"
    assert lane.markdown_table(two) == ["| T | k |", "|---|---|", "| 512 | 3 |"]   # the last table
    assert lane.markdown_table("no table\n") == []
    steps = lane.plan("py", tmp_path, ["bench"])
    assert [s.name for s in steps] == ["bench:trans", "bench:qa_split"]
    (tmp_path / "bench_trans.md").write_text("device: H100\n\n| T | impl |\n|---|---|\n| 512 | triton |\n")
    trans_table = lane.bench_table([str(c) for c in steps[0].cmd], "| printed | not |\n|---|---|\n")
    assert trans_table == ["device: H100", "", "| T | impl |", "|---|---|", "| 512 | triton |"]
    qa_table = lane.bench_table([str(c) for c in steps[1].cmd], QA_SPLIT_OUT)   # its file was not written
    results = [lane.Result(steps[0], 0, 100.0, "", table=trans_table), lane.Result(steps[1], 0, 50.0, "", table=qa_table)]
    text = lane.summary_markdown({"gpu": "H100"}, results, dt.datetime(2026, 11, 26, tzinfo=dt.timezone.utc))
    assert "## bench:qa_split\n" in text and "| memnet | 46.7 | 150.9 | 3.23 |\n| stpr | 2.1 | 2.6 | 1.27 |" in text
    assert "`benchmarks/bench_qa_split.py --device cuda --updates 50 --repeats 3 --markdown bench_qa_split.md`" in text
    assert "## bench:trans\n" in text and "| 512 | triton |" in text and "| printed |" not in text
    assert str(tmp_path) not in text and str(lane.REPO) not in text     # no machine paths in the summary


def test_steps_run_in_the_order_given():
    """A session short of device time names first what it needs most."""
    names = [s.name for s in lane.plan("py", Path("/w"), ["bench_qa", "smoke", "tests", "bench"], ["memnet"])]
    assert names == ["bench:qa_split", "data:qa", "smoke:memnet", "tests", "bench:trans"]   # bench_qa once
    assert [s.name for s in lane.plan("py", Path("/w"), ["tests", "bench"])] == ["tests", "bench:trans",
                                                                                 "bench:qa_split"]
    # --tests: a session short of time leaves out the long precision runs
    (step,) = lane.plan("py", Path("/w"), ["tests"], tests=["tests/test_trans_cuda.py"])
    assert step.cmd[-1] == "tests/test_trans_cuda.py" and "tests/test_precision_cuda.py" not in step.cmd
    with pytest.raises(lane.LaneError, match="--tests tests/nope.py: no such test file"):
        lane.plan("py", Path("/w"), ["tests"], tests=["tests/nope.py"])


FAKE_PY = """#!/bin/sh
if [ "$1" = -c ]; then
  echo '{"python": "3.12", "torch": "x", "cuda": "None", "cuda_available": false, "gpu": "none",
         "triton": "x", "fairseq": "x"}' | tr -d '\\n'; echo; exit 0
fi
echo "step started: $*"
sleep 30    # a child of the step: the group kill must reach it
echo never
"""


def test_budget_cuts_a_step_kills_its_children_and_keeps_the_summary(tmp_path, monkeypatch):
    """--budget: a step gets at most what is left (its whole process group is killed then, children
    too, without waiting for them), later steps are listed as not run, and the summary holds
    what ran."""
    import os
    import time

    fake = tmp_path / "py"
    fake.write_text(FAKE_PY)
    os.chmod(fake, 0o755)
    monkeypatch.setattr(lane, "MIN_STEP_SECONDS", 1)
    summary = tmp_path / "summary.md"
    t0 = time.time()
    rc = lane.main(["run", "--python", str(fake), "--no-install", "--cpu", "--steps", "bench_qa,tests",
                    "--budget", "3", "--work", str(tmp_path / "work"), "--summary", str(summary)])
    took = time.time() - t0
    assert rc == 1 and took < 15, took                  # not the step's own 600 s, nor the child's 30 s
    text = summary.read_text()
    assert text.splitlines()[0].endswith(": FAILED")
    assert "### bench:qa_split: exit 124" in text and "step started:" in text and "never" not in text
    assert "## Not run: the --budget was spent\n\n- tests\n" in text
    assert "Still to run" not in text
    log = (tmp_path / "work" / "logs" / "bench_qa_split.log").read_text()
    assert log.startswith("step started:") and "bench_qa_split.py --device cpu" in log


def test_summary_while_steps_are_pending_says_so(tmp_path):
    steps = lane.plan("py", tmp_path, ["tests", "bench_qa"])
    done = lane.Result(steps[0], 0, 61.0, "", counts={"passed": 4})
    when = dt.datetime(2026, 11, 27, tzinfo=dt.timezone.utc)
    text = lane.summary_markdown({}, [done], when, pending=["bench:qa_split"])
    assert text.splitlines()[0].endswith(": in progress, 1 of 2 steps run")
    assert "## Still to run\n\n- bench:qa_split\n" in text
    text = lane.summary_markdown({}, [done], when, not_run=["bench:qa_split"])
    assert text.splitlines()[0].endswith(": INCOMPLETE, 1 steps not run (budget)")


def test_commit_names_modified_tracked_files(tmp_path):
    """A device's copy may pair an old .git with a newer tree: the summary must say so."""
    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / "new.txt").write_text("untracked files do not count\n")
    assert lane.repo_commit(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert lane.repo_commit(tmp_path) == f"{head}+1 modified"


def test_the_default_lane_has_the_folnet_lean_step_and_precision_last():
    names = [s.name for s in lane.plan("py", Path("/w"), lane.expand_steps(
        "tests,folnet_lean,smoke,bench,precision".split(",")), ["memnet"])]
    assert names[:2] == ["tests", "bench:folnet_lean"] and names[-1] == "precision"
    (lean,) = [s for s in lane.plan("py", Path("/w"), ["folnet_lean"])]
    assert "benchmarks/bench_folnet_lean.py" in " ".join(lean.cmd) and "--device" in lean.cmd
    assert "tests/test_precision_cuda.py" not in lane.plan("py", Path("/w"), ["tests"])[0].cmd


def test_folnet_lean_benchmark_runs_on_cpu(capsys):
    """Every line of the lane's FOLNet lean step runs here too, at tiny widths (its CUDA-only lines:
    the device name, the stream sync and the allocator's peak)."""
    import importlib.util as iu
    spec = iu.spec_from_file_location("bench_folnet_lean", REPO / "benchmarks" / "bench_folnet_lean.py")
    bench = iu.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--device", "cpu", "--quick"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| lean |") or line.startswith("| plain |")]
    assert len(rows) == 6 and "| fp16 autocast |" in out
