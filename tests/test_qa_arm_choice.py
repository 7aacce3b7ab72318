"""The arm rule (evaluations/arm_choice.py, `nesyseq choose-arm`, the curriculum's choose_task2
stage): the arm whose checkpoint has the lower validation loss, the first listed on a tie.  The losses are set by
construction in small checkpoint files (extra_state["val_loss"], where fairseq keeps it), so the
expected arm never depends on two trainings differing by luck; the reference is a brute-force
pick written here."""
import itertools
import json
import os
from pathlib import Path

import pytest
import torch

from nesyseq.evaluations.arm_choice import choose, read_choice
from nesyseq.cli.main import main
from nesyseq.common.errors import UserError


def _ckpts(tmp_path, losses):
    for arm, loss in losses.items():
        d = tmp_path / "train_task2" / f"t2_relative_table={arm}" / "checkpoints"
        d.mkdir(parents=True, exist_ok=True)
        extra = {} if loss is None else {"val_loss": loss, "best": loss}
        torch.save({"model": {"w": torch.zeros(1)}, "cfg": {"task": {"_name": "babi_qa"}}, "extra_state": extra},
                   d / "checkpoint_best.pt")
    return str(tmp_path / "train_task2" / "t2_relative_table={arm}" / "checkpoints" / "checkpoint_best.pt")


def _choose(out, pattern, arms):
    return main(["choose-arm", "--out", str(out), "--arms", arms, "--checkpoint", pattern])


def _expected(order, losses):
    """Brute force: an arm no other arm beats, and of those the first in the order given."""
    return next(a for a in order if all(losses[a] <= losses[b] for b in order))


@pytest.mark.parametrize("losses", [{"keep": 0.25, "zero": 0.125}, {"keep": 0.125, "zero": 0.25},
                                    {"keep": 0.5, "zero": 0.5}, {"keep": 0.3, "zero": 0.2, "zero-near": 0.2}])
def test_choose_arm_stage_picks_the_lower_valid_loss_first_on_a_tie(tmp_path, losses, capsys):
    pattern = _ckpts(tmp_path, losses)
    for order in itertools.permutations(losses):
        out = tmp_path / ("choice_" + "_".join(order))
        assert _choose(out, pattern, " ".join(order)) == 0
        want = _expected(order, losses)
        record = json.loads((out / "arm_choice.json").read_text())
        assert record["chosen"] == want and record["valid_loss"] == losses
        assert record["checkpoints"] == {a: str(Path(pattern.replace("{arm}", a)).resolve()) for a in order}
        target = Path(os.path.realpath(out / "checkpoint_best.pt"))
        assert target == Path(pattern.replace("{arm}", want)).resolve()
        assert read_choice(str(out / "checkpoint_best.pt")) == record          # what evaluate qa reads
        assert choose(losses, list(order)) == want


def test_choose_arm_is_redone_when_the_losses_change(tmp_path):
    """The link follows the checkpoints: the same stage run again after the other arm's loss fell."""
    pattern = _ckpts(tmp_path, {"keep": 0.4, "zero": 0.3})
    out = tmp_path / "choice"
    assert _choose(out, pattern, "keep zero") == 0 and json.loads((out / "arm_choice.json").read_text())["chosen"] == "zero"
    _ckpts(tmp_path, {"keep": 0.1})
    assert _choose(out, pattern, "keep zero") == 0 and json.loads((out / "arm_choice.json").read_text())["chosen"] == "keep"
    assert os.path.realpath(out / "checkpoint_best.pt") == os.path.realpath(pattern.replace("{arm}", "keep"))
    assert sorted(p.name for p in out.iterdir()) == ["arm_choice.json", "checkpoint_best.pt"]   # no temporary left


def test_an_arm_without_a_valid_loss_is_refused_naming_it(tmp_path, capsys):
    pattern = _ckpts(tmp_path, {"keep": 0.4, "zero": None})
    out = tmp_path / "choice"
    assert _choose(out, pattern, "keep zero") == 2
    err = capsys.readouterr().err
    assert "t2_relative_table=zero" in err and "no validation loss" in err and not out.exists()
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(UserError, match="arm b has no validation loss"):
        choose({"a": 0.1, "b": None}, ["a", "b"])


@pytest.mark.parametrize("arms,pattern,words", [("keep keep", "c/{arm}.pt", "distinct"), ("keep zero", "c.pt", "{arm}"),
                                                (" ", "c/{arm}.pt", "distinct")])
def test_bad_arms_are_one_line_errors(tmp_path, capsys, arms, pattern, words):
    assert _choose(tmp_path / "o", str(tmp_path / pattern), arms) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and not (tmp_path / "o").exists()
