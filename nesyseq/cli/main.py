"""The ``nesyseq`` command: one entry point, one subcommand per job.

    nesyseq prepare math      generate + preprocess + binarize the Mathematics Dataset
    nesyseq prepare wmt       clean + SentencePiece + binarize a parallel corpus
    nesyseq evaluate wmt      decode a translation checkpoint, sacrebleu BLEU / chrF
    nesyseq evaluate math     decode a checkpoint, exact match per module, table/CSV/PNG
    nesyseq evaluate lm       a language model's loss / perplexity (fairseq eval-lm) as a CSV
    nesyseq analyze roles     k-means of TP-Transformer role vectors (paper Fig. 3)
    nesyseq prepare entailment / evaluate entailment   logical entailment (TPRU, docs/tpru.md)
    nesyseq convert folnet    the authors' FOLNet checkpoint (*.pt + *.cfg) -> fairseq checkpoint (docs/folnet.md)
    nesyseq convert export    a trained checkpoint's weights only (fp16), for re-evaluation
    nesyseq convert warm-start  a trained checkpoint re-indexed to another dictionary (curriculum; docs/qa.md)
    nesyseq tokenize wordpiece  BERT WordPiece tokenization of raw text (for converted FOLNet checkpoints)
    nesyseq memory folnet     predicted peak GPU training memory of FOLNet (docs/folnet.md)
    nesyseq quickstart        the whole Mathematics Dataset job on a small default
    nesyseq fetch NAME        download an external dataset, verify its sha256, extract it
    nesyseq train             fairseq-train, optionally stopped at a best valid loss (--stop-at-best)
    nesyseq choose-arm        of a stage's arms, the checkpoint of lowest valid loss (curriculum; docs/slurm.md)

Each subcommand lives with the code it drives (``data_prep``, ``evaluations``,
...); a module only needs ``add_arguments(parser)`` and ``run(args)``.  To add one, add a
line to ``COMMANDS`` (and a ``GROUP_HELP`` entry for a new group).

Modules are imported lazily: ``nesyseq --help`` and ``nesyseq GROUP --help`` import none of
them (no torch, no fairseq); a subcommand's module is imported only when that subcommand
runs or its own ``--help`` is asked for.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Iterable, Optional, Tuple

from nesyseq.common.errors import UserError

# (group, name) -> (module, one-line help).  ``name`` None is a top-level command.
COMMANDS = {
    ("prepare", "math"): ("nesyseq.data_prep.math_cli", "generate, preprocess and binarize the Mathematics Dataset"),
    ("prepare", "wmt"): ("nesyseq.data_prep.wmt_prepare", "clean, SentencePiece and binarize a parallel corpus (WMT)"),
    ("evaluate", "math"): ("nesyseq.evaluations.math_eval", "exact-match accuracy per module of a checkpoint"),
    ("evaluate", "lm"): ("nesyseq.evaluations.lm_eval", "a language model's loss and perplexity (fairseq eval-lm) as a table"),
    ("evaluate", "wmt"): ("nesyseq.evaluations.wmt_eval", "decode a translation checkpoint; sacrebleu BLEU and chrF"),
    ("analyze", "roles"): ("nesyseq.evaluations.roles", "k-means clusters of TP-Transformer role vectors (Fig. 3)"),
    ("prepare", "qa"): ("nesyseq.data_prep.qa_cli", "bAbI folder or bAbI-style generator -> fairseq data for --task babi_qa"),
    ("prepare", "qa-zero-shot"): ("nesyseq.data_prep.qa_zero_shot", "the paper's zero-shot test files: bAbI test files with unseen rooms / objects / people"),
    ("evaluate", "qa"): ("nesyseq.evaluations.qa_eval", "answer error of babi_qa checkpoints: table, CSV, PNGs"),
    ("evaluate", "qa-table1"): ("nesyseq.evaluations.qa_table1", "one Table-1 bAbI run: the test error of its "
                                "checkpoint_best.pt and its learning curve, as CSVs"),
    ("memory", "folnet"): ("nesyseq.evaluations.folnet_memory", "predicted peak GPU training memory of FOLNet from counted saved bytes"),
    ("user-dir", None): ("nesyseq.cli.paths", "print the folder to give fairseq's --user-dir (installed or checkout)"),
    ("quickstart", None): ("nesyseq.cli.quickstart", "small end-to-end Mathematics Dataset run"),
    ("fetch", None): ("nesyseq.data_prep.fetch", "download an external dataset (bAbI, logical entailment, WMT'14 en-de), "
                      "verify its sha256 and extract it"),
    ("train", None): ("nesyseq.slurm.train_until", "fairseq-train in this process, optionally stopped once a saved "
                      "checkpoint's valid loss reaches a bound (--stop-at-best)"),
    ("choose-arm", None): ("nesyseq.evaluations.arm_choice", "of several trained checkpoints (a stage's arms), the one "
                           "of lowest validation loss, as a link; no test"),
    ("launch", None): ("nesyseq.slurm.launcher", "run an experiment's stages as SLURM (or local) jobs"),
    ("status", None): ("nesyseq.slurm.status", "state of every job of a launched run, and failure causes"),
    ("collect", None): ("nesyseq.slurm.collect", "one mean ± std table and plot over a run's job array"),
    ("prepare", "entailment"): ("nesyseq.data_prep.entailment_cli", "logical entailment data: Evans et al. files or our generator"),
    ("evaluate", "entailment"): ("nesyseq.evaluations.entailment_eval", "accuracy per split of tpru_classifier checkpoints"),
    ("tokenize", "wordpiece"): ("nesyseq.data_prep.wordpiece", "BERT WordPiece tokenization (for converted FOLNet checkpoints)"),
    ("convert", "folnet"): ("nesyseq.converters.folnet_official", "the authors' FOLNet *.pt + *.cfg -> fairseq checkpoint + dict.txt"),
    ("convert", "export"): ("nesyseq.converters.export", "a trained checkpoint's weights only (fp16 or fp32), for re-evaluation"),
    ("analyze", "math-study"): ("nesyseq.evaluations.math_study", "the TP-T vs Transformer study's report: Table 1, Fig. 2, steps, paired bootstrap"),
    ("convert", "warm-start"): ("nesyseq.converters.warm_start", "a trained checkpoint re-indexed to another dictionary (and grown): the start of a curriculum stage"),
}

GROUP_HELP = {
    "prepare": "build a benchmark's data",
    "evaluate": "score a trained checkpoint",
    "analyze": "inspect what a trained model learned",
    "convert": "import checkpoints released by other code bases, or carry ours to another dictionary",
    "tokenize": "tokenize raw text for a model's vocabulary",
    "memory": "predict a model's training memory",
}


def selected_command(argv) -> Optional[Tuple[str, Optional[str]]]:
    """The COMMANDS key that ``argv`` names, or None (top-level or group help, typos)."""
    words = [a for a in argv if not a.startswith("-")]
    if not words:
        return None
    group = words[0]
    if (group, None) in COMMANDS:
        return (group, None)
    if len(words) > 1 and (group, words[1]) in COMMANDS:
        return (group, words[1])
    return None


def build_parser(only: Optional[Iterable[Tuple[str, Optional[str]]]] = None) -> argparse.ArgumentParser:
    """The full parser; with ``only``, just those subcommands' modules are imported and
    get their options (the others are listed with their one-line help)."""
    only = None if only is None else set(only)
    parser = argparse.ArgumentParser(
        prog="nesyseq",
        description="nesyseq: neuro-symbolic reasoning plugins for fairseq",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"nesyseq {_version()}")
    top = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups = {}
    for (group, name), (module_name, help_text) in COMMANDS.items():
        if name is None:
            sub = top.add_parser(group, help=help_text, description=help_text, allow_abbrev=False,
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        else:
            if group not in groups:
                gp = top.add_parser(group, help=GROUP_HELP.get(group, ""),
                                    description=GROUP_HELP.get(group, ""), allow_abbrev=False)
                groups[group] = gp.add_subparsers(dest="subcommand", metavar="WHAT", required=True)
            # no prefix matching: an option added later would silently change what an old
            # abbreviation meant (prepare qa's --test took over --test-stories' prefix)
            sub = groups[group].add_parser(name, help=help_text, description=help_text, allow_abbrev=False,
                                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        if only is None or (group, name) in only:
            module = importlib.import_module(module_name)
            module.add_arguments(sub)
            sub.set_defaults(_run=module.run)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nesyseq")
    except PackageNotFoundError:   # a checkout run without installing
        return "unknown (not installed)"


def quiet_third_party_logging() -> None:
    """fairseq configures the root logger at INFO when imported (fairseq/tasks/text_to_speech.py:23,
    logging.basicConfig), so every nesyseq error came after lines like "INFO:fairseq.tasks...
    Please install tensorboardX".  Configuring the root logger first, at WARNING, makes that
    basicConfig a no-op; our own messages are prints and one-line errors."""
    import logging

    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(name)s: %(message)s")


def main(argv=None) -> int:
    from nesyseq.common.quiet import install

    install()   # the known-harmless third-party warnings (nesyseq/common/quiet.py)
    argv = sys.argv[1:] if argv is None else list(argv)
    if selected_command(argv) != ("train", None):   # `nesyseq train` is fairseq-train: its log stays
        quiet_third_party_logging()
    chosen = selected_command(argv)
    parser = build_parser(only=[chosen] if chosen else [])
    args, extra = parser.parse_known_args(argv)
    if extra:
        # `launch EXPERIMENT [KEY=VALUE ...]`: argparse stops reading a positional list at the
        # first option, so KEY=VALUE words after options come back here; they are overrides too
        if hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
            args.overrides = list(args.overrides) + extra
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        rc = args._run(args)
    except UserError as exc:  # bad input: one clear line, no traceback
        print(f"nesyseq: error: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
