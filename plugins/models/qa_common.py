"""What the bAbI QA models share (memnet / smn in qa_memnet.py, tpr_rnn / stpr in qa_tpr.py):
the flat source cut back into sentences (``split_story``), the decoder that emits the encoder's
answer distribution (``AnswerDecoder``) and the encoder-decoder model around them (``QAModel``).
"""
from typing import Any, Tuple

import torch
from fairseq.models import FairseqEncoderDecoderModel, FairseqIncrementalDecoder
from torch import Tensor

from nesyseq.plugins.models.config_defaults import model_config


def split_story(src: Tensor, sent_end: int, q_end: int, pad: int, eos: int) -> Tuple[Tensor, Tensor]:
    """(B, T) flat source -> story (B, S, W) and question (B, Wq), padded with ``pad``.
    Sentences are right-aligned in time: story[:, -1] is the most recent sentence.

    Tensor ops only (no loop over rows): pad/eos are skipped, every ``sent_end`` before the first
    ``q_end`` closes a sentence (an empty one too), the words after the last of them up to
    ``q_end`` are the question, everything from ``q_end`` on is ignored.  Equal to the row-by-row
    reference in tests/test_qa_vectorised.py."""
    B, T = src.shape
    dev = src.device
    before_q = src.eq(q_end).long().cumsum(1).eq(0)                       # strictly before the first "?"
    valid = src.ne(pad) & src.ne(eos) & before_q
    is_end = valid & src.eq(sent_end)
    word = valid & ~is_end
    sid = is_end.long().cumsum(1) - is_end.long()                        # sentence of each token
    n_sent = is_end.sum(1)                                               # (B,)
    in_story = word & sid.lt(n_sent[:, None])
    in_q = word & sid.eq(n_sent[:, None])
    S = max(1, int(n_sent.max())) if B else 1
    wc = word.long().cumsum(1) - 1                                       # words before this one (0-based)
    lengths = torch.zeros(B, S + 1, dtype=torch.long, device=dev)
    lengths.scatter_add_(1, sid.clamp(max=S), in_story.long())          # words per sentence
    offsets = lengths.cumsum(1) - lengths                                # words before each sentence
    pos = wc - offsets.gather(1, sid.clamp(max=S))                       # position inside its sentence
    qpos = wc - in_story.long().sum(1, keepdim=True)                     # position inside the question
    W = max(1, int(lengths.max())) if B else 1
    Wq = max(1, int(in_q.sum(1).max())) if B else 1
    story = torch.full((B, S, W), pad, dtype=src.dtype, device=dev)
    question = torch.full((B, Wq), pad, dtype=src.dtype, device=dev)
    b, t = in_story.nonzero(as_tuple=True)
    story[b, S - n_sent[b] + sid[b, t], pos[b, t]] = src[b, t]
    b, t = in_q.nonzero(as_tuple=True)
    question[b, qpos[b, t]] = src[b, t]
    return story, question


class AnswerDecoder(FairseqIncrementalDecoder):
    """Emits the encoder's answer distribution at step 0 and ``</s>`` with certainty after it."""

    def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, **unused):
        probs = encoder_out["answer_probs"][0]                               # (B, V) fp32
        B, T = prev_output_tokens.shape
        start = 0
        if incremental_state is not None:
            start = T - 1
        eos_row = torch.zeros_like(probs)
        eos_row[:, self.dictionary.eos()] = 1.0
        steps = [probs if t == 0 else eos_row for t in range(start, T)]
        return torch.stack(steps, 1), {"attn": [None]}

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        p = net_output[0].float()
        return torch.log(p.clamp(min=1e-30)) if log_probs else p

    def reorder_incremental_state(self, incremental_state, new_order):
        pass

    def max_positions(self):
        return int(1e6)


class QAModel(FairseqEncoderDecoderModel):
    """An answer-distribution encoder (``encoder_class``, built with ``symbolic``) and the
    ``AnswerDecoder``: memnet / smn (qa_memnet.py) and tpr_rnn / stpr (qa_tpr.py)."""
    symbolic = False
    encoder_class: Any = None  # the encoder's class, set by each model
    config_class: Any = None   # the model's FairseqDataclass, set by each model

    @classmethod
    def build_model(cls, cfg, task):
        cfg = model_config(cfg, cls.config_class)
        return cls(cls.encoder_class(cfg, task.source_dictionary, cls.symbolic),
                   AnswerDecoder(task.target_dictionary))

    def set_unseen(self, ids):
        self.encoder.set_unseen(ids)

    def begin_epoch(self, epoch: int):
        """Called by ``--task babi_qa`` at the start of every training epoch (linear start).
        Only encoders with an epoch schedule have the hook (MemNetEncoder); TPREncoder has none."""
        hook = getattr(self.encoder, "begin_epoch", None)
        if hook is not None:
            hook(epoch)

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        return self.decoder.get_normalized_probs(net_output, log_probs, sample)

    def max_positions(self):
        return (int(1e6), int(1e6))
