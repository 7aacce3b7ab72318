"""A TPRU entailment classifier (``--task entailment_pairs``).

    m = nesyseq.load("ck/checkpoint_best.pt")
    m.entails("(a&b)", "a")                       # probability that the premise entails the hypothesis
    m.entails([("(a&b)", "a"), ("a", "b")])       # a list of pairs, batched

Formulas are written in the strict syntax of Evans et al.'s files (``nesyseq prepare entailment``):
variables a-z, ``~(f)``, ``(f&g)``, ``(f|g)``, ``(f>g)``; a formula outside it is a one-line error
naming the character.  The probability is sigmoid of the classifier's logit, the logit that
``nesyseq evaluate entailment`` thresholds at 0.
"""
from __future__ import annotations

import torch
from fairseq.data import data_utils

from nesyseq.common.errors import UserError
from nesyseq.hub.base import ModelFamily


class EntailmentModel(ModelFamily):
    family = "tpru"

    def _encode(self, formula, what: str) -> torch.Tensor:
        from nesyseq.data_prep.entailment_data import FormulaError, parse_formula

        if not isinstance(formula, str):
            raise UserError(f"{what} {formula!r}: expected a string")
        try:
            parse_formula(formula)
        except FormulaError as exc:
            raise UserError(f"{what} {formula!r}: {exc}") from None
        return self.task.encode(formula)

    def entails(self, premise, hypothesis=None):
        """P(premise ⊨ hypothesis) as a float; for a list of (premise, hypothesis) pairs, a list."""
        single = hypothesis is not None
        pairs = [(premise, hypothesis)] if single else list(premise)
        if not pairs:
            return []
        a = [self._encode(p, "premise") for p, _ in pairs]
        b = [self._encode(h, "hypothesis") for _, h in pairs]
        pad = self.task.dictionary.pad()
        with torch.no_grad():
            logits = self.model(a_tokens=data_utils.collate_tokens(a, pad).to(self.device),
                                b_tokens=data_utils.collate_tokens(b, pad).to(self.device))
        probs = torch.sigmoid(logits.float()).tolist()
        return probs[0] if single else probs
