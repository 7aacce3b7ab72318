"""torch.hub entry points: the small trained models shipped in this repository.

    import torch
    qa = torch.hub.load("path/to/nesyseq", "stpr_babi_task1", source="local")
    qa.answer(["Zelda went to the kitchen.", "Oscar moved to the garden."], "Where is Zelda?")   # 'kitchen'

Each entry point is ``nesyseq.load`` on one export (its model card is the README.md beside it);
``device`` as there (default: the GPU when there is one).
"""
from pathlib import Path

dependencies = ["torch", "fairseq"]

_HERE = Path(__file__).resolve().parent
_QA = _HERE / "examples" / "symbolic_qa" / "exports"
_MATH = _HERE / "examples" / "tp_transformer" / "results" / "math_study" / "weights"
_MATH_ARCHS = ("tp_transformer_tiny", "transformer_math_tiny", "transformer_math_tiny_wide")


def _load(path, family, device=None):
    import nesyseq

    return nesyseq.load(path, family=family, device=device)


def stpr_babi_task1(device=None):
    """stpr trained with the Table-2 recipe on bAbI-style task 1 (single supporting fact): answers
    "Where is P?" about people and rooms it never saw.  Card: examples/symbolic_qa/exports/stpr_task1/."""
    return _load(_QA / "stpr_task1", "qa", device)


def stpr_babi_task2(device=None):
    """stpr trained with the Table-2 recipe on bAbI-style task 2 (two supporting facts): answers
    "Where is the O?" about people, rooms and objects it never saw.  Card: examples/symbolic_qa/exports/stpr_task2/."""
    return _load(_QA / "stpr_task2", "qa", device)


def tp_transformer_math(seed=2, arch="tp_transformer_tiny", device=None):
    """The Mathematics Dataset study's models (4,000 updates, 8 modules): ``arch`` one of
    tp_transformer_tiny (TP-T), transformer_math_tiny, transformer_math_tiny_wide; ``seed`` 1, 2 or 3.
    Card: examples/tp_transformer/results/math_study/weights/README.md."""
    if arch not in _MATH_ARCHS or seed not in (1, 2, 3):
        from nesyseq.common.errors import UserError

        raise UserError(f"tp_transformer_math: arch {arch!r} seed {seed!r}; the exports are seeds 1, 2, 3 "
                        f"of {', '.join(_MATH_ARCHS)}")
    return _load(_MATH / f"seed{seed}" / f"{arch}.pt", "math", device)
