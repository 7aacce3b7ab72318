"""The ``nesyseq`` command: one entry point, one subcommand per job.

    nesyseq prepare math      generate + preprocess + binarize the Mathematics Dataset
    nesyseq evaluate math     decode a checkpoint, exact match per module, table/CSV/PNG
    nesyseq analyze roles     k-means of TP-Transformer role vectors (paper Fig. 3)
    nesyseq prepare entailment / evaluate entailment   logical entailment (TPRU, docs/tpru.md)
    nesyseq quickstart        the whole Mathematics Dataset job on a small default

Each subcommand lives with the code it drives (``data_prep``, ``evaluations``,
...); a module only needs ``add_arguments(parser)`` and ``run(args)``.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from nesyseq_cli.errors import UserError

# (group, name) -> (module, one-line help).  ``name`` None is a top-level command.
COMMANDS = {
    ("prepare", "math"): ("data_prep.math_cli", "generate, preprocess and binarize the Mathematics Dataset"),
    ("evaluate", "math"): ("evaluations.math_eval", "exact-match accuracy per module of a checkpoint"),
    ("analyze", "roles"): ("evaluations.roles", "k-means clusters of TP-Transformer role vectors (Fig. 3)"),
    ("quickstart", None): ("nesyseq_cli.quickstart", "small end-to-end Mathematics Dataset run"),
    ("prepare", "entailment"): ("data_prep.entailment_cli", "logical entailment data: Evans et al. files or our generator"),
    ("evaluate", "entailment"): ("evaluations.entailment_eval", "accuracy per split of tpru_classifier checkpoints"),
}

GROUP_HELP = {
    "prepare": "build a benchmark's data",
    "evaluate": "score a trained checkpoint",
    "analyze": "inspect what a trained model learned",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nesyseq",
        description="nesyseq: neuro-symbolic reasoning plugins for fairseq",
    )
    top = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups = {}
    for (group, name), (module_name, help_text) in COMMANDS.items():
        if name is None:
            sub = top.add_parser(group, help=help_text, description=help_text,
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        else:
            if group not in groups:
                gp = top.add_parser(group, help=GROUP_HELP[group], description=GROUP_HELP[group])
                groups[group] = gp.add_subparsers(dest="subcommand", metavar="WHAT", required=True)
            sub = groups[group].add_parser(name, help=help_text, description=help_text,
                                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        module = importlib.import_module(module_name)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args._run(args)
    except UserError as exc:  # bad input: one clear line, no traceback
        print(f"nesyseq: error: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
