"""evaluations/math_eval.score on hand-made fairseq-generate output.

The T-lines are rendered with fairseq's own ``Dictionary.string(..., escape_unk=True)``,
exactly as fairseq-generate prints them, so an unknown target symbol appears as
``<<unk>>``."""
import pytest
import torch
from fairseq.data import Dictionary

from nesyseq.evaluations.math_eval import score
from nesyseq.common.errors import UserError


def _dict():
    d = Dictionary()
    for ch in "0123456789+-=":
        d.add_symbol(ch)
    return d


def _write(tmp_path, lines, modules):
    gen = tmp_path / "generate-test.txt"
    gen.write_text("\n".join(lines) + "\n")
    mods = tmp_path / "test.modules"
    mods.write_text("\n".join(modules) + "\n")
    return gen, mods


def test_unknown_targets_are_counted(tmp_path):
    d = _dict()
    known = d.string(torch.tensor([d.index("4"), d.index("2")]), escape_unk=True)
    unk = d.string(torch.tensor([d.index("4"), d.unk()]), escape_unk=True)
    assert "<<unk>>" in unk.split(" ")  # what fairseq-generate writes
    lines = [f"S-0\t1 + 1", f"T-0\t{known}", f"H-0\t-0.1\t{known}",
             f"S-1\t2 + 2", f"T-1\t{unk}", f"H-1\t-0.1\t{unk}",
             f"S-2\t3 + 3", f"T-2\t{unk}", f"H-2\t-0.1\t4 4"]
    gen, mods = _write(tmp_path, lines, ["a", "a", "b"])
    s = score(gen, mods, "interpolate")
    assert (s.modules["a"].n, s.modules["a"].correct, s.modules["a"].unk_targets) == (2, 1, 1)
    assert (s.modules["b"].n, s.modules["b"].correct, s.modules["b"].unk_targets) == (1, 0, 1)


def test_missing_t_line_is_a_one_line_error_naming_the_id(tmp_path):
    lines = ["S-0\t1", "T-0\t2", "H-0\t-0.1\t2", "S-1\t1", "H-1\t-0.1\t2"]
    gen, mods = _write(tmp_path, lines, ["a", "a"])
    with pytest.raises(UserError) as e:
        score(gen, mods, "interpolate")
    msg = str(e.value)
    assert "\n" not in msg and "T-1" in msg and "id 1" in msg and str(gen) in msg
