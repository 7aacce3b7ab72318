"""``nesyseq evaluate wmt``: decode a translation checkpoint and score it with sacrebleu.

    fairseq-generate DATA --user-dir … --remove-bpe sentencepiece   (beam, lenpen)
      -> hypotheses in input order, SentencePiece pieces joined back into text
      -> sacrebleu BLEU and chrF against DATA/ref/test.<tgt>, the reference exactly
         as the user gave it to ``nesyseq prepare wmt`` (never the BPE'd text)
    OUT/hyp.<subset>.<tgt>, OUT/results.json, OUT/results.csv (for nesyseq collect), OUT/generate-<subset>.txt
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import List, Optional

from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.common.errors import UserError
from nesyseq.common.fairseq_cli import USER_DIR, fairseq_generate
from nesyseq.common.generate_output import read_generate_output


def read_hypotheses(path: Path, n: int) -> List[str]:
    """The hypotheses of fairseq-generate's ``H-<id>`` lines, put back in input order."""
    records = read_generate_output(path)
    missing = [i for i in range(n) if "H" not in records.get(i, {})]
    if missing:
        raise UserError(f"{path}: no hypothesis for {len(missing)} of {n} sentences "
                        f"(first id {missing[0]}); was a sentence skipped as too long?")
    return [records[i]["H"] for i in range(n)]


def detokenize(text: str) -> str:
    """fairseq's sentencepiece removal leaves the text as SentencePiece saw it (raw,
    untokenized); only stray whitespace is left to tidy."""
    return " ".join(text.split())


def score(hyps: List[str], refs: List[str]) -> dict:
    from sacrebleu.metrics import BLEU, CHRF
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(hyps, [refs])
    c = chrf.corpus_score(hyps, [refs])
    return {"bleu": b.score, "bleu_signature": str(bleu.get_signature()), "bleu_str": str(b),
            "chrf": c.score, "chrf_signature": str(chrf.get_signature()), "chrf_str": str(c),
            "n": len(hyps)}


def run_generate(checkpoint: Path, data: Path, src: str, tgt: str, subset: str, out_dir: Path,
                 beam: int, lenpen: float, batch_size: int, cpu: bool,
                 extra: Optional[List[str]] = None) -> Path:
    args = [data, "--user-dir", USER_DIR,
            "--task", "translation", "-s", src, "-t", tgt, "--path", checkpoint,
            "--gen-subset", subset, "--beam", beam, "--lenpen", lenpen, "--nbest", "1",
            "--batch-size", batch_size, "--required-batch-size-multiple", "1",
            "--remove-bpe", "sentencepiece", "--results-path", out_dir] + list(extra or [])
    return fairseq_generate(args, out_dir, subset, cpu, what=str(checkpoint))


def evaluate_wmt(checkpoint, data, subset: str = "test", out_dir=None, beam: int = 5,
                 lenpen: float = 0.6, batch_size: int = 64, cpu: bool = True,
                 reference=None, extra: Optional[List[str]] = None) -> dict:
    checkpoint, data = Path(checkpoint), Path(data)
    from nesyseq.common.cli_args import check_checkpoint_file
    from nesyseq.evaluations import checkpoints

    check_checkpoint_file(checkpoint)
    from nesyseq.data_prep.wmt_prepare import MARKER

    meta_file, marker = data / "prepare.json", data / MARKER
    try:
        interrupted = json.loads(marker.read_text()).get("complete") is False
    except (OSError, ValueError, AttributeError):
        interrupted = False
    if interrupted:
        raise UserError(f"--data {data}: a `nesyseq prepare wmt` into it stopped while moving its files in "
                        f"({marker}); run it again")
    if not meta_file.is_file():
        raise UserError(f"--data {data}: no prepare.json (not made by `nesyseq prepare wmt`)")
    try:
        meta = json.loads(meta_file.read_text())
        src, tgt = meta["src_lang"], meta["tgt_lang"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{meta_file}: not the record `nesyseq prepare wmt` writes ({exc})") from None
    # a translation checkpoint of this language pair whose dictionaries are data's, before decoding
    checkpoints.checked(checkpoint, data, ("translation",), "evaluate wmt", pair=(src, tgt), mmap=True)
    ref_path = Path(reference) if reference else (
        data / "ref" / f"{subset}.{tgt}" if subset == "test" else data / "raw" / f"{subset}.{tgt}")
    if not ref_path.is_file():
        raise UserError(f"{ref_path}: no reference for subset {subset!r} (give --reference)")
    refs = ref_path.read_text(encoding="utf-8").split("\n")
    if refs and refs[-1] == "":
        refs.pop()
    out_dir = Path(out_dir) if out_dir else checkpoint.parent / f"eval-wmt-{subset}"
    out_dir.mkdir(parents=True, exist_ok=True)
    gen = run_generate(checkpoint, data, src, tgt, subset, out_dir, beam, lenpen, batch_size, cpu, extra)
    hyps = [detokenize(h) for h in read_hypotheses(gen, len(refs))]
    hyp_path = out_dir / f"hyp.{subset}.{tgt}"
    atomic_write_bytes(str(hyp_path), "".join(h + "\n" for h in hyps).encode("utf-8"))
    result = score(hyps, refs)
    result.update({"checkpoint": str(checkpoint), "data": str(data), "subset": subset,
                   "beam": beam, "lenpen": lenpen, "hypotheses": str(hyp_path),
                   "reference": str(ref_path)})
    atomic_write_bytes(str(out_dir / "results.json"), (json.dumps(result, indent=2) + "\n").encode())
    # one row for `nesyseq collect` (mean ± std of BLEU and chrF over a launch array's seeds)
    atomic_write_bytes(str(out_dir / "results.csv"),
                       (f"subset,beam,lenpen,bleu,chrf\n{subset},{beam},{lenpen},{result['bleu']:.4f},"
                        f"{result['chrf']:.4f}\n").encode())
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from nesyseq.common import cli_args

    cli_args.add_checkpoint(parser, "fairseq checkpoint(s) (.pt); several are scored one by one, each "
                                    "into OUT/<checkpoint name>/")
    cli_args.add_data(parser, "the OUT of `nesyseq prepare wmt`")
    cli_args.add_out(parser, "eval-wmt-SUBSET/ beside the (first) checkpoint")
    cli_args.add_subset(parser, "test", "split to decode")
    cli_args.add_cpu(parser, gpu_alias=True)
    parser.add_argument("--reference", default=None,
                        help="reference file (default DATA/ref/test.<tgt>, the untouched input)")
    parser.add_argument("--beam", type=int, default=5, help="beam size")
    parser.add_argument("--lenpen", type=float, default=0.6, help="length penalty")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per decoding batch")


def run(args) -> int:
    from nesyseq.common import cli_args

    cpu = cli_args.use_cpu(args)
    several = len(args.checkpoint) > 1
    for ckpt in args.checkpoint:
        out = args.out
        if several:   # one folder per checkpoint
            base = cli_args.out_dir(args, args.checkpoint[0], f"eval-wmt-{args.subset}")
            out = base / Path(ckpt).stem
        r = evaluate_wmt(ckpt, args.data, args.subset, out, args.beam, args.lenpen,
                         args.batch_size, cpu=cpu, reference=args.reference)
        print(f"{ckpt}: BLEU = {r['bleu']:.2f}  ({r['bleu_signature']})")
        print(f"{ckpt}: chrF = {r['chrf']:.2f}  ({r['chrf_signature']})")
        print(f"hypotheses: {r['hypotheses']}")
    return 0
