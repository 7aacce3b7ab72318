"""A bAbI QA model (``memnet``, ``smn``, ``tpr_rnn``, ``stpr``, or a seq2seq model such as the
symbolic transformer trained with ``--task babi_qa``).

    qa = nesyseq.load("examples/symbolic_qa/exports/stpr_task1")
    qa.answer(["Zelda went to the kitchen.", "Oscar moved to the garden."], "Where is Zelda?")   # 'kitchen'
    a = qa.answer(story, question, details=True)     # Answer: probability, β split, hop attention

The story is a list of statements (or one string, a statement per line), optionally numbered as in
a bAbI file ("1 Mary moved to the bathroom."); it is tokenized as ``nesyseq prepare qa`` tokenizes
bAbI (``data_prep.qa_babi.tokenize``) and its most recent ``memory_size`` statements are kept (the
training data's, from ``qa_meta.json`` beside the export).  Words the model's dictionary lacks are
handled as ``nesyseq evaluate qa --babi-file`` handles them: appended to the dictionary as words
unseen in training, with zero semantic and output rows (``evaluations.qa_external``), together with
the training data's own unseen words (``unseen.txt``).  The words of one call are appended at once,
as the words of one file are.
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import torch
from torch import nn

from nesyseq.common.errors import UserError
from nesyseq.data_prep.qa_babi import QUESTION_END, SENTENCE_END, tokenize

_NUMBERED = re.compile(r"^\s*\d+\s+")


@dataclass
class Answer:
    """The answer word and what it rests on, where the model has it.

    ``probability``: the model's p(word).  ``beta``: the weight of the semantic output in
    p = β p_sem + (1 − β) p_sym (smn, stpr, the symbolic transformer); ``semantic`` and
    ``symbolic``: the two terms at the answer, β p_sem(word) and (1 − β) p_sym(word), which sum to
    ``probability``.  ``attention`` (memnet, smn): per hop, the softmax over ``sentences``, the
    statements the model read (oldest first).  ``unseen``: the words of the story and question
    that the model treats as unseen in training."""
    word: str
    probability: float
    sentences: List[str]
    unseen: List[str] = field(default_factory=list)
    beta: Optional[float] = None
    semantic: Optional[float] = None
    symbolic: Optional[float] = None
    attention: Optional[List[List[float]]] = None


def parse_story(story, question, memory_size: Optional[int]):
    """(statements kept, oldest first, each a token list; question tokens); a story in the wrong
    format is a one-line error naming the line."""
    if isinstance(story, str):
        lines = story.splitlines()
    elif isinstance(story, (list, tuple)):
        lines = list(story)
    else:
        raise UserError(f"story: expected a list of statements (or one string, a statement per line), "
                        f"got {type(story).__name__}")
    if not lines:
        raise UserError("story: no statements")
    sents = []
    for n, line in enumerate(lines, 1):
        if not isinstance(line, str):
            raise UserError(f"story line {n}: expected a string, got {type(line).__name__} {line!r:.60}")
        text = _NUMBERED.sub("", line)
        if "?" in text or "\t" in text:
            raise UserError(f"story line {n}: {line.strip()!r:.80} is a question line; the story holds "
                            "statements and the question is answer()'s second argument")
        words = tokenize(text)
        if not words:
            raise UserError(f"story line {n}: {line!r:.60} has no words")
        sents.append(words)
    if not isinstance(question, str):
        raise UserError(f"question: expected a string, got {type(question).__name__}")
    if "\t" in question:
        raise UserError(f"question {question!r:.80}: a tab (a bAbI question line's answer field); "
                        "give the question text only")
    q = tokenize(_NUMBERED.sub("", question))
    if not q:
        raise UserError(f"question {question!r}: no words")
    kept = sents if memory_size is None else sents[-memory_size:]
    return kept, q


class QAModel(nn.Module):
    family = "qa"

    def __init__(self, cfg, task, model, path=None, memory_size: Optional[int] = 50):
        super().__init__()
        self.cfg, self.task, self.path, self.memory_size = cfg, task, path, memory_size
        self.model = model
        self.base_size = len(task.source_dictionary)
        self._extended: tuple = (None, None)               # (new words, (model, dictionary) built for them)
        self.register_buffer("_float_tensor", torch.tensor([0], dtype=torch.float))

    @classmethod
    def from_checkpoint(cls, path, cfg, state, data):
        from nesyseq.hub.checkpoint import build

        task, model = build(cfg, state, data)
        meta = data / "qa_meta.json" if data is not None else None
        memory = json.loads(meta.read_text()).get("memory_size", 50) if meta is not None and meta.is_file() else 50
        return cls(cfg, task, model, path, memory)

    @property
    def device(self):
        return self._float_tensor.device

    @property
    def dictionary(self):
        return self.task.source_dictionary

    def _model_for(self, new_words: Sequence[str]):
        """The model with ``new_words`` appended to its dictionary as words unseen in training
        (zero rows), as ``evaluate qa --babi-file`` builds it; the loaded model when there are none."""
        if not new_words:
            return self.model, self.dictionary
        if self._extended[0] == tuple(new_words):
            return self._extended[1]
        if not hasattr(self.model, "set_unseen"):
            raise UserError(f"word {new_words[0]!r} is not in the model's dictionary and "
                            f"{type(self.model).__name__} cannot take unseen words (it has no set_unseen)")
        from nesyseq.evaluations.qa_external import extend_state_dict

        task = copy.copy(self.task)
        src = copy.deepcopy(self.task.source_dictionary)
        joined = self.task.target_dictionary is self.task.source_dictionary
        tgt = src if joined else copy.deepcopy(self.task.target_dictionary)
        for w in new_words:
            src.add_symbol(w)
            if not joined:
                tgt.add_symbol(w)
        task.src_dict, task.tgt_dict = src, tgt
        model = task.build_model(self.cfg.model)
        model.load_state_dict(extend_state_dict(self.model.state_dict(), model), strict=True,
                              model_cfg=self.cfg.model)
        model.set_unseen(sorted(set(self.task.unseen_ids) | set(range(self.base_size, len(src)))))
        model = model.to(self.device).eval()
        self._extended = (tuple(new_words), (model, src))
        return model, src

    def answer(self, story, question: str, details: bool = False):
        """The answer word to ``question`` about ``story``; with ``details``, an ``Answer``."""
        kept, q = parse_story(story, question, self.memory_size)
        source = [w for s in kept for w in s + [SENTENCE_END]] + q + [QUESTION_END]
        d = self.dictionary
        new = [w for w in dict.fromkeys(source) if d.index(w) == d.unk() and w != d.unk_word]
        model, d = self._model_for(new)
        src = d.encode_line(" ".join(source), add_if_not_exist=False, append_eos=True).long()
        src = src.unsqueeze(0).to(self.device)
        prev = torch.full((1, 1), d.eos(), dtype=torch.long, device=self.device)
        with torch.no_grad():
            try:
                enc = model.encoder(src, src_lengths=torch.tensor([src.size(1)], device=self.device))
                dec = model.decoder(prev, encoder_out=enc)
            except ValueError as exc:          # e.g. a sentence longer than the model's --max-words
                raise UserError(f"story: {str(exc).splitlines()[0]}") from None
            probs = model.get_normalized_probs(dec, log_probs=False)[0, 0].float()
        best = int(probs.argmax())
        word = d[best]
        if not details:
            return word
        unseen_ids = set(self.task.unseen_ids)
        out = Answer(word=word, probability=float(probs[best]), sentences=[" ".join(s) for s in kept],
                     unseen=[w for w in dict.fromkeys(source) if w in new or d.index(w) in unseen_ids])
        parts = enc.get("output_parts") or (dec[1].get("output_parts") if isinstance(dec[1], dict) else None)
        if parts:
            beta = float(parts["beta"].reshape(-1)[0])
            out.beta = beta
            out.semantic = beta * float(parts["semantic"].reshape(-1, parts["semantic"].size(-1))[0, best])
            out.symbolic = (1.0 - beta) * float(parts["symbolic"].reshape(-1, parts["symbolic"].size(-1))[0, best])
        hops = enc.get("hop_attention")
        if hops:
            att = hops[0][0]                                   # (K, S), sentences right-aligned
            out.attention = [row[att.size(1) - len(kept):].tolist() for row in att]
        return out
