"""nesyseq.common.atomic and nesyseq.common.generate_output: the writer every package uses
and the reader of fairseq-generate's output that every evaluator uses."""
import pytest

from nesyseq.common.atomic import atomic_write, atomic_write_bytes, atomic_write_text
from nesyseq.common.errors import UserError
from nesyseq.common.generate_output import read_generate_output


def test_atomic_write_replaces_the_file_whole(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    atomic_write_text(path, "new ü\n")
    assert path.read_bytes() == "new ü\n".encode("utf-8")
    atomic_write_bytes(str(path), b"\x00\x01")  # str paths too
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(b"the checkpoint a user trained")

    def write(tmp):  # half a file, then a crash (a full disk, a bad tensor, ^C)
        with open(tmp, "wb") as f:
            f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, write)
    assert path.read_bytes() == b"the checkpoint a user trained"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]


def test_a_writer_that_never_creates_the_temporary_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "x", lambda tmp: None)
    assert list(tmp_path.iterdir()) == []


GENERATE = """\
2026-11-26 | INFO | fairseq_cli.generate | loading model
S-1\tmary went to the kitchen
T-1\tkitchen
H-1\t-0.0012\tkitchen
D-1\t-0.0012\tkitchen
P-1\t-0.0012 -0.0001
S-0\twhere is john ?
T-0\tgarden
H-0\t-1.5\thallway
H-0\t-2.5\tgarden
H-2\t-0.3\t
Generate test with beam=1: BLEU4 = 0.0
"""


def test_read_generate_output_by_id_first_hypothesis_empty_text(tmp_path):
    path = tmp_path / "generate-test.txt"
    path.write_text(GENERATE, encoding="utf-8")
    recs = read_generate_output(path)
    assert recs == {
        0: {"S": "where is john ?", "T": "garden", "H": "hallway"},  # --nbest 2: the best one
        1: {"S": "mary went to the kitchen", "T": "kitchen", "H": "kitchen"},  # D-/P- skipped
        2: {"H": ""},
    }


def test_read_generate_output_names_the_duplicate_line(tmp_path):
    path = tmp_path / "gen.txt"
    path.write_text("S-0\ta\nT-0\tb\nT-0\tc\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"gen.txt:3: duplicate T-0 line"):
        read_generate_output(path)


def test_wmt_hypotheses_in_input_order_and_a_missing_one_is_named(tmp_path):
    from nesyseq.evaluations.wmt_eval import read_hypotheses

    path = tmp_path / "generate-test.txt"
    path.write_text("S-1\tb\nH-1\t-0.2\tzwei\nH-0\t-0.1\teins\nH-0\t-0.9\tworse\nH-2\t-0.5\n", encoding="utf-8")
    assert read_hypotheses(path, 3) == ["eins", "zwei", ""]       # best of --nbest, empty text kept
    with pytest.raises(UserError, match=r"no hypothesis for 1 of 4 sentences \(first id 3\)"):
        read_hypotheses(path, 4)
