"""configs/experiments/*.yaml, the chains `nesyseq launch` runs: every stage's command must be
one its program accepts (the experiments other than math were written before their commands
existed and drifted from them: a training folder that prepare does not write, an option the
model lacks, an evaluation without its input files), and the QA chain runs end to end.
No SLURM needed: plans are built in-process, the QA chain runs with --executor local."""
import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from slurm.experiment import build_plan, experiment_names

REPO = Path(__file__).resolve().parents[1]
# the keys an experiment leaves to the user (???), with any value of the right kind
REQUIRED = {"wmt": ["corpus=/data/wmt"], "folnet_lm": ["corpus=/data/lm"]}


def _accepts(argv, tmp_path):
    """Parse ``argv`` with the parser of the program it names, as the program would (SystemExit
    on an unknown option or a missing required one)."""
    prog = Path(argv[0]).name
    if prog == "nesyseq":
        from nesyseq_cli.main import build_parser, selected_command

        build_parser(only=[selected_command(argv[1:])]).parse_args(argv[1:])
        return
    from fairseq import options

    parsers = {"fairseq-train": options.get_training_parser, "fairseq-preprocess": options.get_preprocessing_parser,
               "fairseq-eval-lm": options.get_eval_lm_parser}
    assert prog in parsers, f"no parser for {prog} in this test"
    if prog == "fairseq-preprocess":
        parsers[prog]().parse_args(argv[1:])
    else:
        options.parse_args_and_arch(parsers[prog](), input_args=argv[1:])


@pytest.mark.parametrize("name", experiment_names())
def test_every_stage_command_is_accepted_by_its_program(name, tmp_path):
    plan = build_plan(name, REQUIRED.get(name, []), tmp_path / "run", "seed=1,2")
    argvs = [job.argv for jobs in plan.stages for job in jobs]
    assert len(argvs) >= 3, name
    for argv in argvs:
        try:
            _accepts(argv, tmp_path)
        except SystemExit as exc:
            pytest.fail(f"{name}: {Path(argv[0]).name} rejects {' '.join(argv[1:])} (exit {exc.code})")


def test_stages_read_what_the_stage_before_writes(tmp_path):
    """The QA and WMT chains: training reads the folder prepare writes its binaries to, and the
    QA evaluation reads prepare's raw test files (checked on the paths, since --dry-run runs nothing)."""
    qa = build_plan("qa", [], tmp_path / "q", None)
    prep, train, ev = (jobs[0].argv for jobs in qa.stages)
    out = Path(prep[prep.index("--out") + 1])
    assert train[1] == str(out / "bin" / "task2")
    assert [a for a in ev if a.endswith(".txt")] == [str(out / "raw" / f"qa2_{s}.txt")
                                                  for s in ("test", "test_rooms", "test_objects", "test_people")]
    wmt = build_plan("wmt", REQUIRED["wmt"], tmp_path / "w", None)
    prep, train, ev = (jobs[0].argv for jobs in wmt.stages)
    assert train[1] == prep[prep.index("--out") + 1] == ev[ev.index("--data") + 1]


@pytest.mark.slow  # three processes: generate + binarise, 3 epochs of smn, the evaluation
def test_qa_experiment_runs_end_to_end_locally(tmp_path):
    run_dir = tmp_path / "qa run"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # KEY=VALUE both before and after the options (main.py hands the late ones to launch)
    r = subprocess.run([sys.executable, "-m", "nesyseq_cli.main", "launch", "qa", "train_stories=60",
                        "--executor", "local", "--run-dir", str(run_dir), "test_stories=10", "max_epoch=3",
                        "ls_epochs=1"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads((run_dir / "evaluate" / "results" / "qa_external.json").read_text())
    by_file = {Path(x["file"]).name: x for x in results}
    assert sorted(by_file) == ["qa2_test.txt", "qa2_test_objects.txt", "qa2_test_people.txt", "qa2_test_rooms.txt"]
    meta = json.loads((run_dir / "prepare" / "data" / "bin" / "task2" / "qa_meta.json").read_text())
    assert meta["train_stories"] == 60 and meta["test_stories"] == 10
    # the generator's zero-shot splits: 6 new rooms, 6 new objects, a second set of 4 names
    assert [len(by_file[f"qa2_{s}.txt"]["unseen_words"]) for s in ("test", "test_rooms", "test_objects")] == [0, 6, 6]
    assert len(by_file["qa2_test_people.txt"]["unseen_words"]) == 4
    log = (run_dir / "train" / "stage.log").read_text()
    assert "num_updates" in log and "memn2n_step" in (run_dir / "train" / "command.txt").read_text()
    # nesyseq collect reads the evaluation's CSV: one row per test file, its error from the json
    r = subprocess.run([sys.executable, "-m", "nesyseq_cli.main", "collect", str(run_dir)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    md = (run_dir / "collect.md").read_text().splitlines()
    rows = {Path(ln.split(" | ")[0].lstrip("| ")).name: ln for ln in md if ln.startswith("| /")}
    assert sorted(rows) == sorted(by_file)
    for name, x in by_file.items():
        assert f"| {x['error']:.4g} ± 0 |" in rows[name], (rows[name], x["error"])


@pytest.mark.slow  # generate, task 1, warm start, task 2, evaluation: five processes, tiny budgets
def test_qa_tp_curriculum_runs_end_to_end_locally(tmp_path):
    """The curriculum chain on a 2-seed array: task 2 trains from its seed's warm-start file (task
    1's weights, the third and fourth encoder layers copies of the second), the evaluation reports
    both tasks, and `nesyseq collect` averages each task over the seeds."""
    run_dir = tmp_path / "curriculum"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "nesyseq_cli.main", "launch", "qa_tp_curriculum", "--executor", "local",
                        "--run-dir", str(run_dir), "--array", "seed=0,1", "train_stories=40", "test_stories=8",
                        "num_names=4", "t1_updates=6", "t2_updates=4", "relative_buckets=6",
                        "t2_encoder_layers=4", "t2_relative_table=zero"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    # nesyseq collect: one row per task over the two seeds (seed and ckpt name the member)
    r = subprocess.run([sys.executable, "-m", "nesyseq_cli.main", "collect", str(run_dir)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    errors, losses = {}, {}
    for s in (0, 1):
        for row in list(csv.DictReader((run_dir / "evaluate" / f"seed={s}" / "results" / "qa_results.csv").read_text().splitlines()))[:2]:
            errors.setdefault(row["task"], []).append(float(row["error"]))
            losses.setdefault(row["task"], []).append(float(row["valid_loss"]))
    got = {row["task"]: row for row in csv.DictReader((run_dir / "collect.csv").read_text().splitlines())}
    assert sorted(got) == ["1", "2"] and "seed" not in got["1"] and "ckpt" not in got["1"]
    for task, errs in errors.items():
        assert got[task]["members"] == "2" and float(got[task]["error_mean"]) == pytest.approx(sum(errs) / 2, abs=1e-4)
    # collect.md names, per task, the seed of lowest valid loss (the first on a tie) and its error
    md = (run_dir / "collect.md").read_text().split("Member with the lowest valid_loss")[1].splitlines()
    head = next(ln for ln in md if ln.startswith("| model"))
    cols = [c.strip() for c in head.strip("|").split("|")]
    picked = {}
    for ln in md[md.index(head) + 2:]:
        if ln.startswith("|"):
            cells = dict(zip(cols, (c.strip() for c in ln.strip("|").split("|"))))
            picked[cells["task"]] = cells
    assert sorted(picked) == ["1", "2"]
    for task, ls in losses.items():
        best = ls.index(min(ls))
        assert picked[task]["member"].split(" (tied with ")[0] == f"seed={best}"   # the first on a tie
        assert float(picked[task]["error"]) == pytest.approx(errors[task][best], abs=1e-3)
    warm = (run_dir / "warm_start" / "seed=0" / "stage.log").read_text()
    assert "encoder layers: 2 -> 4" in warm and "new (" in warm
    assert "relative-position table zeroed" in warm
    log = (run_dir / "train_task2" / "seed=0" / "stage.log").read_text()
    assert f"Loaded checkpoint {run_dir / 'warm_start' / 'seed=0' / 'start.pt'}" in log
    assert re.search(r"num_updates 4\b", log) and not re.search(r"num_updates [5-9]\b", log)   # task 2's own count
    import torch
    import plugins.checkpoint_safety  # noqa: F401
    t1_state, start_state = (torch.load(run_dir / p, weights_only=True) for p in
                             ("train_task1/seed=0/checkpoints/checkpoint_best.pt", "warm_start/seed=0/start.pt"))
    t1, start = t1_state["model"], start_state["model"]
    key = "encoder.layers.1.ff.fc1.weight"   # task 1's top layer, and the grown third and fourth
    assert all(torch.equal(start[key.replace(".1.", f".{i}.")], t1[key]) for i in (1, 2, 3))
    assert not start["encoder.relative_bias.table.weight"].any()
    ck = torch.load(run_dir / "train_task2" / "seed=0" / "checkpoints" / "checkpoint_best.pt", weights_only=True)
    assert any(k.startswith("encoder.layers.3.") for k in ck["model"]) and ck["cfg"]["model"]["encoder_layers"] == 4
    for state in (t1_state, ck):   # relative_buckets reaches both training stages
        assert state["cfg"]["model"]["encoder_relative_buckets"] == 6
