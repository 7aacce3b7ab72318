"""nesyseq evaluate math over several checkpoints: Table 1 columns per (run, steps) and
the Fig. 2 charts. Scores are hand-made so the expected numbers are computed here by hand."""
import argparse
import csv
from pathlib import Path

import pytest

import nesyseq.evaluations.math_eval as math_eval
from nesyseq.evaluations.math_compare import Entry, checkpoint_steps, write_comparison
from nesyseq.evaluations.math_eval import ModuleScore, SplitScore
from nesyseq.common.errors import UserError

PNG = b"\x89PNG\r\n\x1a\n"


def _split(name, table):
    s = SplitScore(name)
    for module, (n, correct) in table.items():
        s.modules[module] = ModuleScore(module, n=n, correct=correct)
    return s


def _entry(run, steps, interp, extra):
    return Entry(run, steps, {"interpolate": _split("interpolate", interp),
                              "extrapolate": _split("extrapolate", extra)})


def test_table_and_charts(tmp_path):
    entries = [
        _entry("tp", 1700000, {"a": (10, 10), "b": (10, 9)}, {"a_big": (4, 1)}),
        _entry("tp", 700000, {"a": (10, 10), "b": (10, 5)}, {"a_big": (4, 0)}),
        _entry("base", 700000, {"a": (10, 8), "b": (10, 2)}, {"a_big": (4, 2)}),
    ]
    paths = write_comparison(entries, tmp_path, "t")
    rows = list(csv.DictReader(open(paths["steps_csv"])))
    # sorted by run, then steps; mean over modules, modules above 95%
    assert [(r["run"], r["steps"]) for r in rows] == [
        ("base", "700000"), ("tp", "700000"), ("tp", "1700000")]
    assert [float(r["interpolate_accuracy"]) for r in rows] == [(0.8 + 0.2) / 2, (1 + 0.5) / 2,
                                                                 (1 + 0.9) / 2]
    assert [int(r["interpolate_modules_above_95"]) for r in rows] == [0, 1, 1]
    assert [float(r["extrapolate_accuracy"]) for r in rows] == [0.5, 0.0, 0.25]
    md = paths["steps_md"].read_text()
    assert "| tp | 1700k | 95.00% | 1 | 25.00% | 0 |" in md
    for key in ("steps_png", "modules_interpolate", "modules_extrapolate"):
        data = Path(paths[key]).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000


def test_checkpoint_steps_from_fairseq_name(tmp_path):
    assert checkpoint_steps(tmp_path / "checkpoint_3_700000.pt") == 700000


def test_several_checkpoints_through_the_cli(tmp_path, monkeypatch):
    """run() evaluates each checkpoint into OUT/<run>_<steps>/ and writes the comparison."""
    ckpts = []
    for run, steps in (("tp", 700000), ("tp", 1700000), ("base", 700000)):
        p = tmp_path / run / f"checkpoint_9_{steps}.pt"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(b"x")
        ckpts.append(str(p))
    calls = []

    def fake_evaluate(ckpt, data, out_dir, **kw):
        calls.append((Path(ckpt).parent.name, Path(out_dir).name))
        acc = 9 if "1700000" in str(ckpt) else 5
        return [_split("interpolate", {"a": (10, acc)}), _split("extrapolate", {"b": (10, 1)})], {}

    monkeypatch.setattr(math_eval, "evaluate_math", fake_evaluate)
    parser = argparse.ArgumentParser()
    math_eval.add_arguments(parser)
    args = parser.parse_args(["--checkpoint", *ckpts, "--data", "d", "--out", str(tmp_path / "o")])
    assert math_eval.run(args) == 0
    assert calls == [("tp", "tp_700k"), ("tp", "tp_1700k"), ("base", "base_700k")]
    rows = list(csv.DictReader(open(tmp_path / "o" / "steps.csv")))
    assert [(r["run"], r["steps"], r["interpolate_accuracy"]) for r in rows] == [
        ("base", "700000", "0.5000"), ("tp", "700000", "0.5000"), ("tp", "1700000", "0.9000")]
    bad = parser.parse_args(["--checkpoint", *ckpts, "--data", "d", "--out", "o", "--labels", "x"])
    with pytest.raises(UserError, match="--labels"):
        math_eval.run(bad)
