"""Which dictionaries a checkpoint's token ids index: a record kept in the checkpoint.

A fairseq checkpoint holds weights whose rows are token ids, but not the dictionaries that
give the ids their meaning: a model loads on any data folder whose dictionaries have the same
sizes, and then scores garbage.  Every checkpoint that training writes with our ``user_dir``
(plugins/patches/dictionary_record.py) carries, under ``extra_state["dictionaries"]``, one entry
per dictionary of its task::

    {"source": {"size": 40, "sha256": "…"}, "target": {"size": 40, "sha256": "…"}}

``sha256`` is taken over the symbols in id order (specials included; counts left out: they do not
change what an id means).  The evaluators (evaluations/checkpoints.py) compare it with the
dictionaries of the data they are given.  Duck-typed: no fairseq import here.
"""
import hashlib
from typing import Any, Dict, Iterable

RECORD_KEY = "dictionaries"
SIDES = ("source", "target")


def fingerprint(symbols: Iterable[str]) -> Dict[str, object]:
    symbols = list(symbols)
    digest = hashlib.sha256("\n".join(symbols).encode("utf-8")).hexdigest()
    return {"size": len(symbols), "sha256": digest}


def task_dictionaries(task) -> Dict[str, Any]:
    """{"source": Dictionary, "target": Dictionary} of whichever of the two ``task`` has (a
    language-modelling task's are its one dictionary and its output dictionary)."""
    found = {}
    for side in SIDES:
        try:
            d = getattr(task, f"{side}_dictionary")
        except (NotImplementedError, AttributeError):
            continue
        if d is not None and hasattr(d, "symbols"):
            found[side] = d
    return found


def task_fingerprints(task) -> Dict[str, Dict[str, object]]:
    return {side: fingerprint(d.symbols) for side, d in task_dictionaries(task).items()}
