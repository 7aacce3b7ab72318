"""``nesyseq prepare entailment``: Evans et al. (2018)'s logical entailment files, or our generator.

    nesyseq prepare entailment --source DIR --out data/entail     # their train.txt, validate.txt, test_*.txt
    nesyseq prepare entailment --generate --out data/entail --train-size 20000 --test-size 2000 --seed 0

Writes DIR/{split}.txt (``A,B,E``, read by ``--task entailment_pairs``) and DIR/heuristics.md, the
accuracy of the heuristic baselines H1-H4 and of their joint pattern (data_prep/entailment_data.py) on
every split.  The generator makes train, validate and test_easy/hard/big/massive; test_exam (Evans et
al.'s 100 textbook pairs) is only read from --source.
"""
import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="DIR", required=True, help="output directory")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--source", metavar="DIR",
                     help="directory with Evans et al.'s train, validate, test_easy, test_hard, test_big, "
                          "test_massive, test_exam files (.txt optional); missing test files are skipped")
    src.add_argument("--generate", action="store_true", help="generate the splits with our own generator")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (same seed, same files)")
    parser.add_argument("--train-size", type=int, default=20000, help="generated training pairs")
    parser.add_argument("--valid-size", type=int, default=2000, help="generated validation pairs")
    parser.add_argument("--test-size", type=int, default=2000, help="generated pairs per test split")


def _table(rows) -> str:
    from nesyseq.data_prep.entailment_data import HEURISTICS

    lines = ["| split | pairs | entailed % | " + " | ".join(HEURISTICS) + " | H1-H4 joint (fit on train) |",
             "|---|---|---|" + "---|" * (len(HEURISTICS) + 1)]
    for split, exs, h, joint in rows:
        pos = 100.0 * sum(e.label for e in exs) / max(len(exs), 1)
        lines.append(f"| {split} | {len(exs)} | {pos:.1f} | " + " | ".join(f"{x:.1f}" for x in h)
                     + f" | {joint:.1f} |")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    import dataclasses
    import os

    from nesyseq.data_prep.entailment_data import (DEFAULT_SPECS, SPLITS, FormulaError, generate_splits,
                                           heuristic_accuracy, joint_heuristic_accuracy, read_file,
                                           write_file)
    from nesyseq.common.atomic import atomic_write_bytes
    from nesyseq.common.errors import UserError

    if args.generate:
        sizes = {"train": args.train_size, "validate": args.valid_size}
        specs = {k: dataclasses.replace(v, size=sizes.get(k, args.test_size)) for k, v in DEFAULT_SPECS.items()}
        for name in ("train_size", "valid_size", "test_size"):
            if getattr(args, name) < 2:
                raise UserError(f"--{name.replace('_', '-')} must be at least 2")
        splits = generate_splits(specs, seed=args.seed)
    else:
        if not os.path.isdir(args.source):
            raise UserError(f"--source {args.source}: not a directory")
        splits = {}
        for split in SPLITS:
            for name in (split, split + ".txt"):
                path = os.path.join(args.source, name)
                if os.path.isfile(path):
                    try:
                        splits[split] = read_file(path)
                    except FormulaError as err:
                        raise UserError(str(err)) from None
                    break
        for need in ("train", "validate"):
            if need not in splits:
                raise UserError(f"--source {args.source}: no {need} or {need}.txt file")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for split, exs in splits.items():
        write_file(os.path.join(args.out, f"{split}.txt"), exs)
        rows.append((split, exs, heuristic_accuracy(exs), joint_heuristic_accuracy(splits["train"], exs)))
    table = _table(rows)
    atomic_write_bytes(os.path.join(args.out, "heuristics.md"), table.encode("utf-8"))
    print(table, end="")
    print(f"wrote {', '.join(f'{s}.txt' for s in splits)} to {args.out}")
    return 0
