"""configs/qa_tp_babi_curriculum.sh on tiny data: the valid-loss stop rule ends a stage early
(STOP_BITS), the warm start and task 2 follow, both stages with BUCKETS relative buckets and task 2
with T2_LAYERS encoder layers, a second
call skips the finished stages, a finished stage that lost its .done marker gets it back without
training, and one without a checkpoint_last.pt (an older qa_train's) is refused rather than used."""
import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "configs" / "qa_tp_babi_curriculum.sh"


def _run(out, **env):
    full = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=sys.executable,
                PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                TRAIN_STORIES="40", TEST_STORIES="8", NAMES="4", BUCKETS="6", T2_LAYERS="4", T2_RELATIVE="zero")
    full.update(env)
    full = {k: v for k, v in full.items() if v is not None}   # None: the script's own default
    return subprocess.run(["bash", str(SCRIPT), str(out), "0", "1"], cwd=REPO, env=full, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow  # generate, two short fairseq-train runs, the warm start, the evaluation
def test_curriculum_script_stops_early_then_skips_and_refuses(tmp_path):
    out = tmp_path / "c"
    # every saved valid loss is below 100 bits: task 1 must be stopped long before its budget
    r = _run(out, T1_UPDATES="5000", T2_UPDATES="3", STOP_BITS="100")
    assert r.returncode == 0, r.stderr[-3000:]
    log1 = (out / "ck" / "t1_s0.log").read_text()
    assert "stopped, valid loss <= 100 bits" in log1
    assert max(int(n) for n in re.findall(r"num_updates (\d+)", log1)) < 5000
    assert (out / "ck" / "t1_s0.done").exists() and (out / "ck" / "t2_s0.done").exists()
    # T2_LAYERS reaches the warm start and task 2's training (the default is 3)
    assert "encoder layers: 2 -> 4" in (out / "ck" / "t1_s0.to_task2.log").read_text()
    # T2_RELATIVE too (one table: the start is t1_s0.to_task2)
    assert "relative-position table zeroed" in (out / "ck" / "t1_s0.to_task2.log").read_text()
    assert "'encoder_layers': 4," in (out / "ck" / "t2_s0.log").read_text()
    assert "Loaded checkpoint" in (out / "ck" / "t2_s0.log").read_text()
    for n in ("t1_s0", "t2_s0"):   # BUCKETS reaches both stages (the default is 64)
        assert "'encoder_relative_buckets': 6," in (out / "ck" / f"{n}.log").read_text()
    table = (out / "report" / "qa_results.csv").read_text().splitlines()
    assert [ln.split(",")[1] for ln in table[1:]] == ["1", "2"]
    # called again: both stages are skipped (their logs are not rewritten)
    before = {n: (out / "ck" / f"{n}.log").stat().st_mtime_ns for n in ("t1_s0", "t2_s0")}
    r = _run(out, T1_UPDATES="5000", T2_UPDATES="3", STOP_BITS="100")
    assert r.returncode == 0, r.stderr[-3000:]
    assert {n: (out / "ck" / f"{n}.log").stat().st_mtime_ns for n in before} == before
    # a task-2 stage that finished but lost its marker (killed before `touch`): its log says
    # "done training", so it gets the marker back without a resume (which would add an update)
    (out / "ck" / "t2_s0.done").unlink()
    ck_mtime = (out / "ck" / "t2_s0" / "checkpoint_last.pt").stat().st_mtime_ns
    r = _run(out, T1_UPDATES="5000", T2_UPDATES="3", STOP_BITS="100")
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "ck" / "t2_s0.done").exists() and "resuming" not in (out / "ck" / "t2_s0.log").read_text()
    assert (out / "ck" / "t2_s0" / "checkpoint_last.pt").stat().st_mtime_ns == ck_mtime
    # (an interrupted run resuming is tests/test_qa_train_resume.py)
    # interrupted, but its warm start was made again since (task 1 retrained): refused, not resumed
    (out / "ck" / "t2_s0.done").unlink()
    later = (out / "ck" / "t2_s0" / "checkpoint_last.pt").stat().st_mtime + 60
    os.utime(out / "ck" / "t1_s0.to_task2.pt", (later, later))
    r = _run(out, T1_UPDATES="5000", T2_UPDATES="3", STOP_BITS="100")
    assert r.returncode != 0 and "its start" in r.stderr and str(out / "ck" / "t2_s0") in r.stderr
    assert (out / "ck" / "t2_s0" / "checkpoint_last.pt").stat().st_mtime_ns == ck_mtime
    # one with a checkpoint_best.pt but no checkpoint_last.pt to resume from (an older qa_train's):
    # refused with the folder named, not used
    (out / "ck" / "t2_s0" / "checkpoint_last.pt").unlink()
    r = _run(out, T1_UPDATES="5000", T2_UPDATES="3", STOP_BITS="100")
    assert r.returncode != 0 and f"{out / 'ck' / 't2_s0'} has a checkpoint_best.pt but no" in r.stderr
    # the warm start's options changed: the start is made again (the stage after it is refused as above)
    r = _run(out, T1_UPDATES="5000", T2_UPDATES="3", STOP_BITS="100", T2_RELATIVE="keep")
    assert "relative-position table zeroed" not in (out / "ck" / "t1_s0.to_task2.log").read_text()
    assert (out / "ck" / "t1_s0.to_task2.opts").read_text().split() == ["--encoder-layers", "4", "--relative-table", "keep"]


def _best_score(log):
    """checkpoint_best's valid loss, read independently of the script: the lowest score of fairseq's
    "Saved checkpoint ... (epoch E @ U updates, score S)" lines."""
    return min(float(x) for x in re.findall(r"Saved checkpoint .*score ([0-9.]+)\)", log.read_text()))


@pytest.mark.slow  # generate, task 1, two warm starts, two task-2 runs, the evaluation
def test_curriculum_script_two_tables_keeps_the_run_of_lower_valid_loss(tmp_path):
    out = tmp_path / "c"
    # a bad list is refused before any work, naming the option
    for bad, msg in (("keep zeros", "zeros is not keep, zero or zero-near"), ("zero keep zero", "names a table twice")):
        r = _run(out, T2_RELATIVE=bad)
        assert r.returncode == 2 and f'T2_RELATIVE="{bad}"' in r.stderr and msg in r.stderr, r.stderr
        assert not out.exists()
    # enough task 1 (60 updates at lr 1e-2) for its relative table to matter at the warm start
    r = _run(out, TRAIN_STORIES="200", T1_UPDATES="60", T2_UPDATES="24", LR="0.01", STOP_BITS="",
             T2_RELATIVE="keep zero")
    assert r.returncode == 0, r.stderr[-3000:]
    ck = out / "ck"
    assert "relative-position table zeroed" in (ck / "t1_s0.to_task2_zero.log").read_text()
    assert "relative-position table zeroed" not in (ck / "t1_s0.to_task2_keep.log").read_text()
    for rel in ("keep", "zero"):
        assert (ck / f"t2_s0_{rel}.done").exists()
        # each arm trains from its own start (fairseq logs its config as a dict)
        assert f"'finetune_from_model': '{ck / f't1_s0.to_task2_{rel}.pt'}'" in (ck / f"t2_s0_{rel}.log").read_text()
    scores = {rel: _best_score(ck / f"t2_s0_{rel}.log") for rel in ("keep", "zero")}
    # the two arms may reach the same best loss on some CPUs: the rule keeps the first listed on a tie
    chosen = "keep" if scores["keep"] <= scores["zero"] else "zero"
    assert os.readlink(ck / "t2_s0") == f"t2_s0_{chosen}" and os.readlink(ck / "t2_s0.log") == f"t2_s0_{chosen}.log"
    assert (ck / "t2_s0.choice").read_text().split("\n")[-2] == f"chosen: {chosen}"
    # the report: task 2 of the chosen run under the plain name, and each table's run beside it
    rows = {(row["model"], row["task"]): row
            for row in csv.DictReader((out / "report" / "qa_results.csv").read_text().splitlines())}
    assert set(rows) == {("tp_transformer_tiny_sym", "1"), ("tp_transformer_tiny_sym", "2"),
                         ("tp_transformer_tiny_sym_keep", "2"), ("tp_transformer_tiny_sym_zero", "2")}
    assert rows[("tp_transformer_tiny_sym", "2")]["error"] == rows[(f"tp_transformer_tiny_sym_{chosen}", "2")]["error"]
    for rel in ("keep", "zero"):
        assert float(rows[(f"tp_transformer_tiny_sym_{rel}", "2")]["valid_loss"]) == pytest.approx(scores[rel], abs=1e-3)
    # the choice when the arms differ, by construction: the other arm's log gets a saved checkpoint
    # of a lower score than any real one; called again (both arms done, nothing retrained), the
    # script must now link that arm
    other = "zero" if chosen == "keep" else "keep"
    with open(ck / f"t2_s0_{other}.log", "a") as log:
        log.write(f"Saved checkpoint {ck}/t2_s0_{other}/checkpoint_best.pt (epoch 9 @ 99 updates, score 0.0001)\n")
    r = _run(out, TRAIN_STORIES="200", T1_UPDATES="60", T2_UPDATES="24", LR="0.01", STOP_BITS="",
             T2_RELATIVE="keep zero")
    assert r.returncode == 0, r.stderr[-3000:]
    assert os.readlink(ck / "t2_s0") == f"t2_s0_{other}" and os.readlink(ck / "t2_s0.log") == f"t2_s0_{other}.log"
    assert (ck / "t2_s0.choice").read_text().split("\n")[-2] == f"chosen: {other}"


@pytest.mark.slow  # generate (tiny), then the refusal; no training
def test_curriculum_script_two_tables_refuses_a_folder_of_one_table(tmp_path):
    """OUT/ck/t2_s0 from an earlier one-table call is a run, not a link: with a list of tables it is
    refused with its name (never replaced by a link, never written into)."""
    out = tmp_path / "c"
    ck = out / "ck"
    (ck / "t1_s0").mkdir(parents=True)
    (ck / "t1_s0.done").touch()                        # task 1 counts as finished
    (ck / "t2_s0").mkdir()
    (ck / "t2_s0" / "checkpoint_best.pt").write_bytes(b"an earlier one-table run")
    r = _run(out, T2_RELATIVE=None)   # the default ("keep zero" since 2026-11-28) is a list of tables
    assert r.returncode == 1 and f"{ck / 't2_s0'} is a run of one table" in r.stderr, r.stderr[-2000:]
    assert not (ck / "t2_s0").is_symlink() and sorted(p.name for p in (ck / "t2_s0").iterdir()) == ["checkpoint_best.pt"]
    assert not list(ck.glob("t2_s0_*")) and not list(ck.glob("t1_s0.to_task2*"))
