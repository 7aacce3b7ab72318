"""Quickstart's training progress: fairseq's own log lines (as fairseq/logging/progress_bar.py
SimpleProgressBar.log / .print format them) in a child process, progress on screen."""
import io
import sys

from nesyseq.cli.train_progress import parse_line, run_with_progress

LINES = [
    "2026-01-01 00:00:00 | INFO | fairseq_cli.train | task: TranslationTask",
    "2026-01-01 00:00:05 | INFO | train_inner | epoch 001:     50 / 143 loss=3.912, nll_loss=3.9, "
    "ppl=14.9, wps=5000, ups=9.1, wpb=500, bsz=40, num_updates=50, lr=0.001, gnorm=1.2, clip=100, "
    "train_wall=5, wall=6",
    "2026-01-01 00:00:10 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 2.5 | "
    "nll_loss 2.5 | ppl 5.6 | wps 9000 | wpb 400 | bsz 30 | num_updates 100 | best_loss 2.5",
    "2026-01-01 00:00:11 | INFO | train_inner | epoch 001:    100 / 143 loss=2.75, nll_loss=2.7, "
    "num_updates=100, lr=0.001",
    "2026-01-01 00:00:12 | INFO | fairseq_cli.train | done training in 12.0 seconds",
]


def _child(tmp_path, rc=0):
    script = tmp_path / "fake_train.py"
    script.write_text("import sys\n" + "".join(f"print({line!r}, flush=True)\n" for line in LINES)
                      + f"sys.exit({rc})\n")
    return [sys.executable, str(script)]


def test_parse_fairseq_lines():
    assert parse_line(LINES[0]) is None
    assert parse_line(LINES[1]) == (50, 3.912, False)  # not nll_loss
    assert parse_line(LINES[2]) == (100, 2.5, True)  # not best_loss


def test_plain_lines_when_not_a_terminal(tmp_path):
    out = io.StringIO()
    log = tmp_path / "train.log"
    assert run_with_progress(_child(tmp_path), log, 200, stream=out) == 0
    assert log.read_text().splitlines() == LINES  # the log keeps every line
    shown = out.getvalue().splitlines()
    assert len(shown) == 3 and "\r" not in out.getvalue()
    assert "50/200 updates" in shown[0] and "loss 3.912" in shown[0] and "elapsed" in shown[0]
    assert shown[1].strip().startswith("validation:") and "valid loss 2.500" in shown[1]
    assert "100/200 updates" in shown[2] and "loss 2.750" in shown[2]


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_bar_on_a_terminal_and_exit_code(tmp_path):
    out = _Tty()
    assert run_with_progress(_child(tmp_path, rc=3), tmp_path / "l", 200, stream=out) == 3
    text = out.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n")
    assert "[" + "#" * 15 + "-" * 15 + "] 100/200 updates" in text  # half way
