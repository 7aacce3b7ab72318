"""Mathematics Dataset pipeline: generate -> preprocess -> binarize (one call).

    from nesyseq.data_prep.math_pipeline import prepare_math
    bin_dir = prepare_math("data/math", modules="algebra__linear_1d,arithmetic__add_*",
                           per_module=3000, seed=0, workers=2)
    # fairseq-train bin_dir --task translation -s src -t tgt ...   (selects on valid)
    # fairseq-generate bin_dir --gen-subset test    (interpolate)
    # fairseq-generate bin_dir --gen-subset test1   (extrapolate)

Layout under ``out_dir``: ``raw/<split>/<module>.txt`` (DeepMind's format, see
:mod:`data_prep.math_generate`), ``text/`` and ``bin/`` (see
:mod:`data_prep.math_preprocess`, which also documents why checkpoints are
selected on the held-out ``valid`` slice of the training data and never on the
interpolate test set, as the reference code does).

Re-running is cheap: finished (split, module) files are not regenerated and
preprocessing is skipped when ``bin/prepare_stats.json`` records the same raw
files and options.
"""
from __future__ import annotations

import pathlib
from typing import Optional

from nesyseq.data_prep.math_generate import (  # noqa: F401  (re-exported API)
    default_test_per_module,
    generate_math,
    list_modules_text,
    module_names,
    resolve_modules,
)
from nesyseq.data_prep.math_preprocess import is_up_to_date, preprocess_math  # noqa: F401

__all__ = ["prepare_math", "check_options", "generate_math", "preprocess_math", "resolve_modules", "module_names"]


def prepare_math(out_dir, modules: str = "*", per_module: int = 300,
                 test_per_module: Optional[int] = None, seed: int = 0, workers: int = 1,
                 valid_fraction: float = 0.05, progress: bool = True, raw_dir=None,
                 preprocess_only: bool = False, force_preprocess: bool = False, srcdict=None) -> pathlib.Path:
    """Generate (unless ``raw_dir``/``preprocess_only``) and preprocess; return ``out_dir/bin``.

    ``per_module`` training examples per module, ``per_module // 3`` per train
    difficulty (DeepMind's ``--per_train_module``); ``test_per_module``
    (default ``max(10, per_module // 30)``) per interpolate/extrapolate module;
    ``modules`` comma-separated globs over the 56 module names; ``raw_dir``
    preprocesses raw files produced elsewhere (e.g. DeepMind's v1.0 tarball)
    instead of generating into ``out_dir/raw``.
    """
    out_dir = pathlib.Path(out_dir)
    check_options(out_dir, modules, per_module, test_per_module, workers, valid_fraction, raw_dir,
                  preprocess_only, srcdict)
    if raw_dir is None:
        raw = out_dir / "raw"
        if not preprocess_only:
            generate_math(raw, modules=modules, per_module=per_module, test_per_module=test_per_module,
                          seed=seed, workers=workers, progress=progress,
                          before_changes=lambda: drop_derived(out_dir))
    else:
        raw = pathlib.Path(raw_dir)
    if not force_preprocess and is_up_to_date(out_dir, raw, modules, seed, valid_fraction, srcdict):
        return out_dir / "bin"
    return preprocess_math(out_dir, raw_dir=raw, modules=modules, seed=seed,
                           valid_fraction=valid_fraction, workers=workers, progress=progress, srcdict=srcdict)


def check_options(out_dir, modules: str, per_module: int, test_per_module: Optional[int], workers: int,
                  valid_fraction: float, raw_dir=None, preprocess_only: bool = False, srcdict=None) -> None:
    """Every option of :func:`prepare_math` checked before any work (one-line ``UserError``s), so
    that a bad one costs no generation and leaves nothing behind."""
    from nesyseq.common.errors import UserError
    from nesyseq.data_prep.math_preprocess import discover_raw

    out_dir = pathlib.Path(out_dir)
    for name, ours in (("bin", _made_bin), ("text", _made_text)):
        d = out_dir / name
        if d.is_dir() and any(d.iterdir()) and not ours(d):
            raise UserError(f"--out {out_dir}: {d} was not made by `nesyseq prepare math` and would be replaced; "
                            "move it, or give another --out")
    if not 0.0 < float(valid_fraction) < 1.0:
        raise UserError(f"--valid-fraction must be in (0, 1), got {valid_fraction}")
    if int(workers) < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    if srcdict is not None and not pathlib.Path(srcdict).is_file():
        raise UserError(f"--dict {srcdict}: no such file")
    if raw_dir is not None:
        discover_raw(raw_dir)
    elif preprocess_only:
        discover_raw(pathlib.Path(out_dir) / "raw")
    else:
        if int(per_module) < 3:
            raise UserError(f"--per-module must be >= 3 (it is split evenly over train-easy, train-medium and "
                            f"train-hard), got {per_module}")
        if test_per_module is not None and int(test_per_module) < 1:
            raise UserError(f"--test-per-module must be >= 1, got {test_per_module}")
        resolve_modules(modules)


def _made_bin(d: pathlib.Path) -> bool:
    from nesyseq.data_prep.math_preprocess import STATS_FILE

    return (d / STATS_FILE).is_file()


def _made_text(d: pathlib.Path) -> bool:
    """text/ holds only what preprocess_math writes there."""
    import re

    return all(re.fullmatch(r"(train|valid|test1?)\.(src|tgt|modules)", p.name) for p in d.iterdir())


def drop_derived(out_dir) -> None:
    """Before raw/ changes: remove the text/ and bin/ an earlier run made from the old raw files
    (bin/ holds its prepare_stats.json), so that a run stopped midway never leaves raw/ of one
    seed beside bin/ of another; this run writes both again."""
    import shutil
    import sys

    from nesyseq.data_prep.math_preprocess import STATS_FILE

    out_dir = pathlib.Path(out_dir)
    if (out_dir / "bin" / STATS_FILE).is_file():
        print(f"nesyseq: {out_dir}/raw changes: its text/ and bin/ are made again", file=sys.stderr)
        for name in ("bin", "text"):
            shutil.rmtree(out_dir / name, ignore_errors=True)
