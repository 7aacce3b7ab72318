"""``nesyseq memory folnet``: the saved-bytes fit and the peak-memory model (evaluations/folnet_memory.py).

The fit is checked against a direct count at a shape it was not fitted on; the model's
prediction for the plain path (lean off, the code the H100 figures of issue 62 were
measured on: 24.0 GB at amp, T=128, B=32, 12 layers) must stay within 15% of that
figure; the CLI refuses bad options with one line.
"""
import pytest
import torch

from folnet_helpers import single_thread  # noqa: F401

from nesyseq.cli.main import main
from nesyseq.evaluations import folnet_memory as fm


def test_fit_predicts_an_unseen_count():
    """Within 3%: at small T a few products keep a reshaped copy instead of a view, so the counts
    are a quadratic in T only up to that."""
    fit = fm.fit_layer("ours", torch.float32)
    assert fit.check_error < 0.03
    direct = fm.count_layer("ours", 40, 3).total
    assert abs(fit(40, 3) - direct) / direct < 0.03, (fit(40, 3), direct)


def test_lean_keeps_less_than_plain_at_base_widths():
    """At T=32 the unary branch (the same on both paths) is still a third of the total: 0.55x."""
    lean, plain = fm.count_layer("ours", 32, 2).total, fm.count_layer("plain", 32, 2).total
    assert lean < 0.6 * plain, (lean, plain)


def test_model_agrees_with_the_h100_figure_for_the_plain_path():
    dtype = torch.bfloat16
    fit = fm.fit_layer("plain", dtype, trans_impl=fm.gpu_trans_impl(128, dtype))
    peak = fm.predict(fit, 12, 128, 32, dtype, fm.ours_params(12))["peak"]
    assert abs(peak / 24.0e9 - 1) < 0.15, peak / 1e9


def test_largest_batch_is_the_last_that_fits():
    fit = fm.fit_layer("ours", torch.float32)
    params = fm.ours_params(2)
    b = fm.largest_batch(fit, 2, 64, torch.float32, params, 3.0)
    assert b >= 1
    assert fm.predict(fit, 2, 64, b, torch.float32, params)["peak"] <= 3.0e9
    assert fm.predict(fit, 2, 64, b + 1, torch.float32, params)["peak"] > 3.0e9


@pytest.mark.parametrize("argv,needle", [
    (["memory", "folnet", "--T", "1"], "--T 1"),
    (["memory", "folnet", "--gpu-gb", "40,x"], "--gpu-gb"),
    (["memory", "folnet", "--official-repo", "/nonexistent/folnet"], "--official-repo"),
])
def test_cli_bad_options_are_one_line_errors(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
