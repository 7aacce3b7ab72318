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

__all__ = ["prepare_math", "generate_math", "preprocess_math", "resolve_modules", "module_names"]


def prepare_math(out_dir, modules: str = "*", per_module: int = 300,
                 test_per_module: Optional[int] = None, seed: int = 0, workers: int = 1,
                 valid_fraction: float = 0.05, progress: bool = True, raw_dir=None,
                 preprocess_only: bool = False, force_preprocess: bool = False) -> pathlib.Path:
    """Generate (unless ``raw_dir``/``preprocess_only``) and preprocess; return ``out_dir/bin``.

    ``per_module`` training examples per module, ``per_module // 3`` per train
    difficulty (DeepMind's ``--per_train_module``); ``test_per_module``
    (default ``max(10, per_module // 30)``) per interpolate/extrapolate module;
    ``modules`` comma-separated globs over the 56 module names; ``raw_dir``
    preprocesses raw files produced elsewhere (e.g. DeepMind's v1.0 tarball)
    instead of generating into ``out_dir/raw``.
    """
    out_dir = pathlib.Path(out_dir)
    if raw_dir is None:
        raw = out_dir / "raw"
        if not preprocess_only:
            generate_math(raw, modules=modules, per_module=per_module, test_per_module=test_per_module,
                          seed=seed, workers=workers, progress=progress)
    else:
        raw = pathlib.Path(raw_dir)
    if not force_preprocess and is_up_to_date(out_dir, raw, modules, seed, valid_fraction):
        return out_dir / "bin"
    return preprocess_math(out_dir, raw_dir=raw, modules=modules, seed=seed,
                           valid_fraction=valid_fraction, workers=workers, progress=progress)
