"""Tiny untrained checkpoints, written as fairseq-train writes them, for the ``nesyseq.load`` tests
of the families that ship no export (WMT, FOLNet, TPRU) and of the docs' Python blocks."""
import json
from pathlib import Path

import torch
from fairseq.data import Dictionary
from omegaconf import OmegaConf

from nesyseq import plugins  # noqa: F401  (registers the models and tasks)

REPO = Path(__file__).resolve().parents[1]


def save_checkpoint(path, data, argv, seed=0, perturb=0.0, max_len_b=None):
    """fairseq-train's parsing of ``DATA argv``, the model it builds (seed ``seed``; ``perturb``: plus
    that much Gaussian noise on every weight; ``max_len_b``: the longest output its saved generation
    config allows, so that an untrained model, which never ends a sentence, decodes quickly), saved with
    the config container and optimizer history that fairseq-train writes; returns the model."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(data), *argv])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(seed)
    model = task.build_model(cfg.model)
    if perturb:                                   # every weight off its init (e.g. β away from 1/2)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(perturb * torch.randn_like(p))
    container = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    if max_len_b is not None:
        container["generation"]["max_len_b"] = max_len_b
    state = {"cfg": container, "model": model.state_dict(),
             "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "Adam",
                                    "lr_scheduler_state": {}, "num_updates": 1}],
             "extra_state": {}, "last_optimizer_state": None}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, str(path))
    return model.eval()


def word_dictionary(words):
    d = Dictionary()
    for w in words:
        d.add_symbol(w)
    d.finalize(padding_factor=1)
    return d


def wmt_data(out: Path) -> Path:
    """A ``prepare wmt``-shaped folder: spm.model trained on a few lines of this repository's docs,
    the joined dictionary of its pieces as dict.en.txt / dict.de.txt, and prepare.json."""
    import sentencepiece as spm

    out.mkdir(parents=True, exist_ok=True)
    text = (REPO / "docs" / "wmt.md").read_text(encoding="utf-8").splitlines()
    lines = [ln for ln in text if ln.strip()][:120]
    (out / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(out / "corpus.txt"), model_prefix=str(out / "spm"), vocab_size=120,
                                   model_type="bpe", character_coverage=1.0, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    d = word_dictionary(sp.id_to_piece(i) for i in range(3, sp.get_piece_size()))
    for lang in ("en", "de"):
        d.save(str(out / f"dict.{lang}.txt"))
    (out / "prepare.json").write_text(json.dumps({"src_lang": "en", "tgt_lang": "de", "moses_norm": False}))
    return out


def wmt_checkpoint(path: Path, data: Path):
    return save_checkpoint(path, data, ["--task", "translation", "-s", "en", "-t", "de", "--arch", "tp_transformer_tiny"],
                           max_len_b=12)


def folnet_data(out: Path, corpus: Path) -> Path:
    """dict.txt of a text file, as ``fairseq-preprocess --only-source`` counts its words."""
    from collections import Counter

    out.mkdir(parents=True, exist_ok=True)
    counts = Counter(corpus.read_text(encoding="utf-8").split())
    d = Dictionary()
    for w, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        d.add_symbol(w, n)
    d.save(str(out / "dict.txt"))
    return out


def folnet_checkpoint(path: Path, data: Path):
    return save_checkpoint(path, data, ["--task", "masked_lm", "--criterion", "masked_lm", "--arch", "folnet_tiny",
                                        "--tokens-per-sample", "32"])


def folnet_lm_checkpoint(path: Path, data: Path):
    return save_checkpoint(path, data, ["--task", "language_modeling", "--arch", "folnet_lm_tiny",
                                        "--tokens-per-sample", "32"])


def tpru_checkpoint(path: Path, data: Path):
    data.mkdir(parents=True, exist_ok=True)
    return save_checkpoint(path, data, ["--task", "entailment_pairs", "--arch", "tpru_classifier", "--cell", "tpru",
                                        "--num-roles", "8", "--criterion", "entailment_bce"])
