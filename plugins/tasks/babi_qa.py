"""``--task babi_qa``: question answering on data from ``nesyseq prepare qa``.

The data is a translation pair: source ``s_1 . s_2 . ... s_n . q ?`` (story sentences
closed by ``.``, the question by ``?``), target the one-token answer.  The task is
fairseq's ``translation`` task with the pair fixed to ``src``/``tgt``, so
``fairseq-train`` / ``fairseq-generate`` work as for any seq2seq model; it also loads
``unseen.txt`` (words absent from train, own dictionary entries) for the models that
zero their semantic rows at evaluation.
"""
import os
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from nesyseq.plugins.layers.entity_dropout import EntityDropout
from nesyseq.plugins.models.config_defaults import upgrade_named_config


@dataclass
class BabiQAConfig(TranslationConfig):
    source_lang: Optional[str] = field(default="src", metadata={"help": "source suffix (prepare qa writes src)"})
    target_lang: Optional[str] = field(default="tgt", metadata={"help": "target suffix (prepare qa writes tgt)"})
    zero_unseen: bool = field(default=True, metadata={
        "help": "give words that never occur in train (unseen.txt) zero semantic embedding / output rows "
                "(paper); models without set_unseen ignore it"})
    left_pad_source: bool = field(default=False, metadata={"help": "pad source on the right"})
    valid_entity_dropout: bool = field(default=False, metadata={
        "help": "(ours) compute the validation loss under the model's training entity dropout, with masks "
                "drawn from a generator seeded by each batch's example ids (the same masks at every "
                "validation), so the lr plateau rule and checkpoint_best see what the zero-shot test sees; "
                "only for models with entity dropout on (tpr_rnn / stpr --entity-dropout*).  It acts in "
                "task.valid_step only (fairseq-train's validation, fairseq-validate); nesyseq evaluate qa "
                "and fairseq-generate never drop"})


def learning_dropouts(model) -> list:
    """The model's entity-dropout modules that learn their words (--entity-dropout-learn)."""
    return [m for m in model.modules() if isinstance(m, EntityDropout) and m.costs is not None]


def example_losses(model, net_output, target, pad: int):
    """(B,) the summed token NLL of each example, in fp32, from the model's own distribution."""
    lprobs = model.get_normalized_probs(net_output, log_probs=True).float()          # (B, T, V)
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)                       # (B, T)
    return nll.masked_fill(target.eq(pad), 0.0).sum(-1)


def check_valid_entity_dropout(model) -> None:
    """--valid-entity-dropout needs a model whose entity dropout is on."""
    if not (hasattr(model, "validation_entity_dropout") and model.entity_dropout_rate() > 0.0):
        raise ValueError(f"--valid-entity-dropout: the model ({type(model).__name__}) has no entity dropout "
                         "turned on; it needs tpr_rnn / stpr with --entity-dropout, --entity-dropout-story, "
                         "--entity-dropout-random-rate or --entity-dropout-type > 0")


@register_task("babi_qa", dataclass=BabiQAConfig)
class BabiQATask(TranslationTask):
    def __init__(self, cfg, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.unseen_words = []
        first = cfg.data.split(os.pathsep)[0] if cfg.data else ""
        path = os.path.join(first, "unseen.txt")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                self.unseen_words = [w.strip() for w in f if w.strip()]
        self.unseen_ids = sorted(src_dict.index(w) for w in self.unseen_words)

    def build_model(self, cfg, from_checkpoint=False):
        if from_checkpoint:   # a checkpoint's config may come from before the option groups
            upgrade_named_config(cfg)
        model = super().build_model(cfg, from_checkpoint)
        if self.cfg.zero_unseen and self.unseen_ids and hasattr(model, "set_unseen"):
            model.set_unseen(self.unseen_ids)
        if self.cfg.valid_entity_dropout:
            check_valid_entity_dropout(model)
        return model

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """fairseq's step; with --entity-dropout-learn, the step's forward output also gives each
        example's loss to the learning dropout modules (one forward: a hook keeps the output)."""
        learners = learning_dropouts(model)
        if not learners:
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        kept = []
        hook = model.register_forward_hook(lambda _m, _i, out: kept.append(out))
        try:
            result = super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        finally:
            hook.remove()
        if kept:
            with torch.no_grad():
                loss = example_losses(model, kept[-1], sample["target"], self.tgt_dict.pad())
            for m in learners:
                m.observe(loss)
        return result

    def valid_step(self, sample, model, criterion):
        if not self.cfg.valid_entity_dropout:
            return super().valid_step(sample, model, criterion)
        # the batch's example ids fix its masks: fairseq's validation batches are the same each time
        seed = int(sample["id"].sum()) if sample and "id" in sample else 0
        with model.validation_entity_dropout(seed):
            return super().valid_step(sample, model, criterion)

    def begin_epoch(self, epoch, model):
        """Linear start (``memnet``/``smn`` ``--linear-start-epochs``) ends by the epoch count, as the
        MemN2N reference code does (MemN2N-babi-matlab/config_babi.m:31, train_linear_start.m)."""
        super().begin_epoch(epoch, model)
        if hasattr(model, "begin_epoch"):
            model.begin_epoch(epoch)
