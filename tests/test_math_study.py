"""The math study's report (evaluations/math_study.py), checked against sums and standard
deviations computed here from the same CSVs; the role-cluster character classes; the bootstrap
interval's edge cases; the weights export."""
import csv
import json
import random
import statistics
from pathlib import Path

import pytest
import torch

from nesyseq.evaluations import math_study
from nesyseq.converters.export import export_weights
from nesyseq.evaluations.math_compare import format_steps
from nesyseq.evaluations.roles import char_classes, cluster_table
from nesyseq.common.errors import UserError

MODELS = ("tp_transformer_tiny", "transformer_math_tiny", "transformer_math_tiny_wide")
MODULES = ("arithmetic__mixed", "comparison__pair", "numbers__place_value")


def _write_run(root: Path, model: str, seed: int, accs: dict, steps: dict, best: int):
    """One evaluate folder as `nesyseq evaluate math --checkpoint SAVE_DIR` writes it."""
    folder = root / "evaluate" / f"seed={seed}" / f"arch={model}"
    folder.mkdir(parents=True)
    (folder / "best.json").write_text(json.dumps({"checkpoint": "x", "steps": best}))
    with open(folder / "steps.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "steps", "interpolate_accuracy", "interpolate_modules_above_95",
                    "extrapolate_accuracy", "extrapolate_modules_above_95"])
        for st, (i, e) in sorted(steps.items()):
            w.writerow([model, st, f"{i:.4f}", 0, f"{e:.4f}", 0])
    for st in steps:
        sub = folder / f"{model}_{format_steps(st)}"
        sub.mkdir()
        with open(sub / "results.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["split", "module", "n", "correct", "accuracy", "unk_targets"])
            for (split, module), a in sorted(accs.items()):
                # a different step: other accuracies, so reading the wrong step shows
                a = a if st == best else a / 2
                w.writerow([split, module, 100, round(100 * a), f"{a:.4f}", 0])


@pytest.fixture
def study(tmp_path):
    rng = random.Random(5)
    truth = {}
    for model in MODELS:
        for seed in (1, 2, 3):
            accs = {("interpolate", m): round(rng.uniform(0.1, 1.0), 2) for m in MODULES}
            accs[("extrapolate", "arithmetic__mixed_longer")] = round(rng.uniform(0, 0.5), 2)
            best = rng.choice([1000, 2000])
            steps = {1000: (rng.random(), rng.random()), 2000: (rng.random(), rng.random())}
            _write_run(tmp_path, model, seed, accs, steps, best)
            truth[(model, seed)] = (accs, steps)
    return tmp_path, truth


def _read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_table1_modules_and_steps_are_the_seeds_mean_and_std(study):
    root, truth = study
    paths = math_study.build_report(root, root / "report", draws=200)
    t1 = {r["model"]: r for r in _read(paths["table1.csv"])}
    assert list(t1) == list(MODELS)  # TP-T first
    for model in MODELS:
        interp = [statistics.mean(a for (s, _), a in truth[(model, seed)][0].items() if s == "interpolate")
                  for seed in (1, 2, 3)]
        above = [sum(a > 0.95 for (s, _), a in truth[(model, seed)][0].items() if s == "interpolate")
                 for seed in (1, 2, 3)]
        assert float(t1[model]["interpolate_mean"]) == pytest.approx(statistics.mean(interp), abs=1e-4)
        assert float(t1[model]["interpolate_std"]) == pytest.approx(statistics.stdev(interp), abs=1e-4)
        assert float(t1[model]["interpolate_above95_mean"]) == pytest.approx(statistics.mean(above), abs=1e-4)
    mods = {(r["split"], r["module"], r["model"]): r for r in _read(paths["modules.csv"])}
    key = ("interpolate", "comparison__pair", "transformer_math_tiny")
    vals = [truth[("transformer_math_tiny", s)][0][("interpolate", "comparison__pair")] for s in (1, 2, 3)]
    assert float(mods[key]["mean"]) == pytest.approx(statistics.mean(vals), abs=1e-4)
    assert float(mods[key]["std"]) == pytest.approx(statistics.stdev(vals), abs=1e-4)
    steps = {(r["model"], r["steps"], r["split"]): r for r in _read(paths["steps.csv"])}
    vals = [truth[("tp_transformer_tiny", s)][1][2000][1] for s in (1, 2, 3)]
    assert float(steps[("tp_transformer_tiny", "2000", "extrapolate")]["mean"]) == pytest.approx(
        statistics.mean(vals), abs=1e-4)
    pairs = {(r["comparison"], r["split"]): r for r in _read(paths["paired.csv"])}
    p = pairs[("tp_transformer_tiny - transformer_math_tiny_wide", "interpolate")]
    diffs = [truth[("tp_transformer_tiny", s)][0][("interpolate", m)]
             - truth[("transformer_math_tiny_wide", s)][0][("interpolate", m)] for s in (1, 2, 3) for m in MODULES]
    assert int(p["pairs"]) == 9
    assert float(p["mean_difference"]) == pytest.approx(statistics.mean(diffs), abs=1e-4)
    assert float(p["ci95_low"]) <= float(p["mean_difference"]) <= float(p["ci95_high"])
    for name in ("modules_interpolate.png", "modules_extrapolate.png", "accuracy_vs_updates.png", "results.md"):
        assert (root / "report" / name).stat().st_size > 0


def test_bootstrap_interval_edges():
    # every pair the same difference: no spread to resample
    mean, lo, hi = math_study.bootstrap_mean_ci([0.25] * 12, draws=500)
    assert (mean, lo, hi) == (0.25, 0.25, 0.25)
    # one pair of +1 among 19 zeros: the interval covers 0 and stays below 0.25
    mean, lo, hi = math_study.bootstrap_mean_ci([1.0] + [0.0] * 19, draws=4000)
    assert mean == pytest.approx(0.05) and lo == 0.0 and 0.05 < hi < 0.25


def test_report_refuses_a_folder_without_evaluations(tmp_path):
    with pytest.raises(UserError, match="no evaluate/"):
        math_study.build_report(tmp_path, tmp_path / "r")


def test_char_classes_of_a_mixed_arithmetic_problem():
    text = "What▁is▁(-4)/(-2)*3-12/6?"
    got = char_classes(list(text))
    want = (["letter"] * 4 + ["space"] + ["letter"] * 2 + ["space"]
            + ["bracket", "sign", "numerator", "bracket", "operator", "bracket", "sign", "denominator",
               "bracket", "operator", "digit", "operator", "numerator", "numerator", "operator",
               "denominator", "punctuation"])
    assert got == want


def test_cluster_purity_counts():
    classes = ["digit", "digit", "operator", "letter", "letter", "letter"]
    labels = [0, 0, 0, 1, 1, 1]
    rows, weighted = cluster_table(classes, labels, 2)
    assert [(r["cluster"], r["size"], r["dominant"]) for r in rows] == [(0, 3, "digit"), (1, 3, "letter")]
    assert rows[0]["purity"] == pytest.approx(2 / 3) and weighted == pytest.approx(5 / 6)


def _fake_checkpoint(path: Path):
    state = {"cfg": {"model": {"_name": "x"}, "task": {"data": "/home/someone/data/bin"}}, "model": {"w": torch.randn(4, 3), "steps": torch.tensor([7])},
             "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "Adam",
                                    "lr_scheduler_state": {}, "num_updates": 42}],
             "extra_state": {"val_loss": 1.5, "train_iterator": {"epoch": 3}},
             "last_optimizer_state": {"state": {0: {"exp_avg": torch.randn(4, 3)}}}}
    torch.save(state, path)
    return state


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_export_keeps_weights_config_and_updates_only(tmp_path, dtype):
    state = _fake_checkpoint(tmp_path / "c.pt")
    export_weights(tmp_path / "c.pt", tmp_path / "out" / "m.pt", dtype)
    got = torch.load(tmp_path / "out" / "m.pt", weights_only=True)
    want = state["model"]["w"].half() if dtype == "fp16" else state["model"]["w"]
    assert got["model"]["w"].dtype == want.dtype and torch.equal(got["model"]["w"], want)
    assert torch.equal(got["model"]["steps"], state["model"]["steps"])  # integers untouched
    assert got["cfg"] == {"model": {"_name": "x"}, "task": {"data": ""}}   # no path of the training machine
    assert got["optimizer_history"][0]["num_updates"] == 42
    assert got["last_optimizer_state"] is None and "train_iterator" not in got["extra_state"]
    from fairseq.checkpoint_utils import load_checkpoint_to_cpu

    # fairseq's own loader (it upgrades every checkpoint it reads): nothing it needs is gone
    assert load_checkpoint_to_cpu(str(tmp_path / "out" / "m.pt"))["optimizer_history"][-1]["num_updates"] == 42


def test_export_names_a_truncated_checkpoint(tmp_path):
    _fake_checkpoint(tmp_path / "c.pt")
    data = (tmp_path / "c.pt").read_bytes()
    (tmp_path / "t.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match=r"t\.pt: not a readable checkpoint"):
        export_weights(tmp_path / "t.pt", tmp_path / "m.pt")
    assert not (tmp_path / "m.pt").exists()
