"""``nesyseq prepare math``: generate, preprocess and binarize the Mathematics Dataset.

    nesyseq prepare math --out data/math --per-module 3000 --modules 'arithmetic__*' --workers 2
    nesyseq prepare math --list-modules
    nesyseq prepare math --out data/math --preprocess-only          # redo text/ and bin/
    nesyseq prepare math --out data/math --raw-dir mathematics_dataset-v1.0

See :mod:`data_prep.math_pipeline` for the layout.  Heavy imports (fairseq,
mathematics_dataset) happen inside :func:`run` so that ``nesyseq --help`` stays fast.
"""
from __future__ import annotations

import argparse
import os


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="DIR",
                        help="output directory: DIR/raw (generated files), DIR/text, DIR/bin (fairseq data)")
    parser.add_argument("--per-module", type=int, default=300, metavar="N",
                        help="training examples per module across the three difficulties, N // 3 "
                             "each in train-easy, train-medium, train-hard (DeepMind's "
                             "--per_train_module); 2000000 is the paper's / released v1.0 size")
    parser.add_argument("--test-per-module", type=int, default=None, metavar="N",
                        help="examples per interpolate / extrapolate module; None: max(10, per-module // 30)")
    parser.add_argument("--modules", default="*", metavar="PATTERNS",
                        help="comma-separated glob patterns over module names, e.g. "
                             "'algebra__linear_1d,arithmetic__add_*'; an extrapolate module is included "
                             "when its family (the train module it extends, e.g. arithmetic__add_or_sub "
                             "for arithmetic__add_or_sub_big) is selected; see --list-modules")
    parser.add_argument("--seed", type=int, default=0,
                        help="random seed; the same seed gives byte-identical files whatever --workers "
                             "and --modules are")
    parser.add_argument("--workers", type=int, default=max(1, min(8, os.cpu_count() or 1)),
                        help="parallel generator processes (one (split, module) job each at a time)")
    parser.add_argument("--valid-fraction", type=float, default=0.05,
                        help="fraction of training questions held out as the validation split "
                             "(checkpoint selection happens on it, never on the test sets)")
    parser.add_argument("--list-modules", action="store_true",
                        help="print the module names (and each extrapolate module's family) and exit")
    parser.add_argument("--preprocess-only", action="store_true",
                        help="do not generate; re-run preprocessing/binarization on DIR/raw")
    parser.add_argument("--raw-dir", metavar="RAW",
                        help="preprocess raw files from RAW (DeepMind layout: RAW/train-easy/*.txt, "
                             "RAW/interpolate/*.txt, RAW/extrapolate/*.txt, ...) instead of generating")
    parser.add_argument("--dict", metavar="FILE", default=None,
                        help="binarize with this dictionary (dict.src.txt of a trained model's data, e.g. "
                             "an exported model's) instead of one built from train, so that a model can "
                             "be evaluated on test sets generated with another --seed")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args) -> int:
    from nesyseq.common.errors import UserError

    if args.list_modules:
        from nesyseq.data_prep.math_generate import list_modules_text

        print(list_modules_text())
        return 0
    if not args.out:
        raise UserError("--out DIR is required (or --list-modules)")
    from nesyseq.common.out_folder import FolderLock, check_out_path
    from nesyseq.data_prep.math_pipeline import check_options, prepare_math

    check_out_path(args.out)
    check_options(args.out, args.modules, args.per_module, args.test_per_module, args.workers,
                  args.valid_fraction, args.raw_dir, args.preprocess_only, args.dict)
    with FolderLock(args.out, "nesyseq prepare math"):   # one run at a time writes into --out
        bin_dir = prepare_math(args.out, modules=args.modules, per_module=args.per_module,
                               test_per_module=args.test_per_module, seed=args.seed, workers=args.workers,
                               valid_fraction=args.valid_fraction, progress=not args.no_progress,
                               raw_dir=args.raw_dir, preprocess_only=args.preprocess_only,
                               force_preprocess=args.preprocess_only, srcdict=args.dict)
    _print_summary(bin_dir)
    print(bin_dir)
    return 0


def _print_summary(bin_dir) -> None:
    """One line on stderr: examples per subset and modules, from prepare_stats.json."""
    import json
    import sys

    try:
        stats = json.loads((bin_dir / "prepare_stats.json").read_text())
    except (OSError, ValueError):
        return
    sub = stats.get("subsets", {})
    parts = [f"{name} {sub[name]['examples']}" for name in ("train", "valid", "test", "test1") if name in sub]
    mods = len(stats.get("raw", {}).get("interpolate", {}))
    extra = len(stats.get("raw", {}).get("extrapolate", {}))
    print(f"nesyseq: prepared {', '.join(parts)} examples ({mods} modules, {extra} extrapolate modules; "
          f"test = interpolate, test1 = extrapolate)", file=sys.stderr)
    n_valid = sub.get("valid", {}).get("examples", 0)
    if n_valid > 200_000:  # every validation decodes all of it (5.6M at paper scale, 5%)
        print(f"nesyseq: note: valid has {n_valid} examples, all scored at every validation; "
              "a smaller --valid-fraction (e.g. 0.001 at 2M per module) subsamples it",
              file=sys.stderr)
