"""A local launch you can watch (slurm/launcher.py, slurm/status.py, slurm/watch.py): jobs.json
exists before the first job starts, ``nesyseq status`` shows a running job's progress from another
process, the launch prints progress lines and, at the end, the collected results table.

The experiment is a yaml of this test with one stage, a small Python script per array member
(one stage: each submitit job costs seconds): it prints fairseq's own log lines (the format of
fairseq_cli/train.py's time stamp and of SimpleProgressBar), waits for a gate file, so the test
decides when it ends, and writes the results table that `nesyseq collect` reads."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

TRAIN = r'''
import os, sys, time
gate, seed, csv = sys.argv[1:4]
max_update = int(sys.argv[sys.argv.index("--max-update") + 1])
def log(msg):
    print(time.strftime("%Y-%m-%d %H:%M:%S") + " | INFO | " + msg, flush=True)
log("fairseq_cli.train | task: BabiQATask")
log("train_inner | epoch 001:      2 / 5 loss=2.5, nll_loss=2.5, num_updates=2, lr=0.001")
time.sleep(1.2)
log("train_inner | epoch 001:      4 / 5 loss=1.25, nll_loss=1.2, num_updates=4, lr=0.001")
log("valid | epoch 001 | valid on 'valid' subset | loss 1.5 | nll_loss 1.5 | num_updates 4 | best_loss 1.5")
end = time.time() + 120   # a failed test opens the gate; this is the last resort
while not os.path.exists(gate) and time.time() < end:
    time.sleep(0.1)
log(f"train_inner | epoch 002:      2 / 5 loss=0.5, num_updates={max_update}, lr=0.001")
open(csv, "w").write("file,questions,tokens,error\nqa2_test.txt,1000,27430,%s\n" % (0.5 if seed == "0" else 1.5))
'''


def _experiment(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    yaml = tmp_path / "watch.yaml"
    yaml.write_text(f"""name: watch
seed: 0
max_update: 10
stages:
  - name: evaluate
    argv: [{sys.executable}, {tmp_path / 'train.py'}, {tmp_path / 'gate'}, "${{seed}}", "${{job_dir}}/results.csv",
           --max-update, "${{max_update}}"]
    outputs: ["${{job_dir}}/results.csv"]
""")
    return yaml


def _status(run_dir):
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "status", str(run_dir)], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _wait_until(what, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        got = what()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError("timed out")


@pytest.mark.slow  # two submitit jobs side by side and the collected table: about 15 s
def test_status_during_a_running_local_launch_shows_progress(tmp_path):
    yaml, run_dir = _experiment(tmp_path), tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    launch = subprocess.Popen([sys.executable, "-m", "nesyseq.cli.main", "launch", str(yaml), "--executor", "local",
                               "--array", "seed=0,1", "--run-dir", str(run_dir)], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # jobs.json before any job ended: every job listed
        record = _wait_until(lambda: (run_dir / "jobs.json").is_file() and json.loads((run_dir / "jobs.json").read_text()))
        assert [r["stage"] for r in record["jobs"]] == ["evaluate", "evaluate"]
        # from another process: both jobs running, 4 of 10 updates, the losses, a time left
        status = _wait_until(lambda: (lambda s: s if s.count("4/10 updates") == 2 else "")(_status(run_dir)))
        rows = [ln for ln in status.splitlines() if ln.startswith("evaluate")]
        assert len(rows) == 2 and all("RUNNING" in ln for ln in rows), status
        assert all("loss 1.250" in ln and "valid loss 1.500" in ln and "left" in ln for ln in rows), status
        (tmp_path / "gate").write_text("")
        out, err = launch.communicate(timeout=120)
    finally:   # whatever happened, the jobs may end (they wait for the gate) and the launch stops
        (tmp_path / "gate").write_text("")
        if launch.poll() is None:
            launch.kill()
            launch.communicate(timeout=60)
    assert launch.returncode == 0, err
    # the launch's own progress lines, one per job, then the collected table: counts without ±,
    # the error with its unit
    assert re.search(r"evaluate seed=0: \d+/10 updates, loss \d", out), out
    assert re.search(r"evaluate seed=1: 10/10 updates, loss 0\.500, valid loss 1\.500", out), out
    assert "evaluate seed=1: done in" in out, out
    table = out[out.index("| file"):]
    assert "| file | questions | tokens | error (%) |" in table, out
    assert "| qa2_test.txt | 1000 | 27430 | 1 ± 0.71 |" in table, out
    status = _status(run_dir)
    assert status.count("COMPLETED") == 2 and status.count("10/10 updates") == 2, status


def test_a_failed_job_shows_the_last_lines_of_its_log(tmp_path, capsys):
    """status of a run whose local prepare job failed and whose train job never started (the
    record a stopped launch leaves): the cause, the log's last lines, and the later job not started.
    No process is started: the job ids are PIDs that no longer run."""
    import argparse

    from nesyseq.slurm import status

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    folders = {s: tmp_path / "run" / s for s in ("prepare", "train")}
    for f in folders.values():
        f.mkdir(parents=True)
    (folders["prepare"] / "stage.log").write_text(
        "=== start 1 at 2026-01-01 00:00:00 (requeues so far 0) ===\nreading dict.src.txt\n"
        + "".join(f"line {i} of the log\n" for i in range(2, 12))
        + "ValueError: bad vocabulary in dict.src.txt line 3\n")
    jobs = [dict(stage="prepare", job_id=dead, state="FAILED", folder=str(folders["prepare"]), executor="local",
                 command="nesyseq prepare qa"),
            dict(stage="train", job_id="pending", state="PENDING", folder=str(folders["train"]), executor="local",
                 command="fairseq-train --max-update 10")]
    (tmp_path / "run" / "jobs.json").write_text(json.dumps({"experiment": "x", "executor": "local", "jobs": jobs,
                                                            "launcher": {"pid": int(dead)}}))
    status.run(argparse.Namespace(run_dir=str(tmp_path / "run")))
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith(("prepare ", "train "))]
    assert "FAILED" in rows[0] and "ValueError: bad vocabulary in dict.src.txt line 3" in rows[0], out
    assert "NOT STARTED (the launch stopped)" in rows[1], out
    tail = out[out.index("the last lines of"):].splitlines()[1:]
    assert [ln.strip() for ln in tail] == [f"line {i} of the log" for i in range(5, 12)] + \
        ["ValueError: bad vocabulary in dict.src.txt line 3"], out


def test_launch_help_lists_every_experiment():
    """`nesyseq launch --help` names every experiment of configs/experiments/ (a yaml with stages),
    listed here from the folder itself; the Hydra-only wmt_en_de.yaml is not one."""
    from nesyseq.cli.main import build_parser

    folder = REPO / "configs" / "experiments"
    names = sorted(p.stem for p in folder.glob("*.yaml") if "\nstages:" in p.read_text())
    assert {"qa_table2", "math_study", "qa_tp_curriculum", "math"} <= set(names) and "wmt_en_de" not in names
    parser = build_parser(only=[("launch", None)])
    launch = parser._subparsers._group_actions[0].choices["launch"]
    text = " ".join(launch.format_help().split())
    listed = re.search(r"a name in configs/experiments/ \(([^)]*)\)", text).group(1)
    assert [n.strip() for n in listed.split(",")] == names
