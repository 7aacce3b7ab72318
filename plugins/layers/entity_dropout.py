"""Entity dropout (ours; docs/qa.md): in training, per example, some context words are
treated as words unseen in training, the way the paper's zero-shot test treats them (their
semantic embedding and output rows read as zero).  One option group and one module serve every
model that has it (tpr_rnn / stpr, tp_transformer):

    EntityDropoutConfig              the options, a nested group of the model's config
                                     (``cfg.entity_drop``; flags --entity-dropout, --entity-dropout-*)
    EntityDropout(cfg, dictionary)   the module: ``drop(slots)`` is the (B, V) bool mask of the words
                                     treated as unseen in each example, None when off or in eval mode
    word_mask("mary,john", d)        (V,) bool over the dictionary, the listed words
    word_mask("@names.txt", d)       the same, words read from a file (whitespace-separated)
    WordCosts                        --entity-dropout-learn: which words may be picked, learned from
                                     the loss of the examples that dropped them (``observe``)
"""
import contextlib
import logging
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import torch
from fairseq.dataclass import FairseqDataclass
from torch import Tensor, nn

from nesyseq.plugins.layers.symbolic import ContextSymbols

logger = logging.getLogger(__name__)


def listed_words(words: str, what: str) -> List[str]:
    """The words of an option value: comma-separated, or ``@PATH``, a file of whitespace-separated
    words (10,000 names do not fit a command line).  ``what`` names the option in errors."""
    words = (words or "").strip()
    if words.startswith("@"):
        return option_file(words[1:], what, "the word list").split()
    return [w.strip() for w in words.split(",") if w.strip()]


def option_file(path: str, what: str, kind: str) -> str:
    """The text of an option's ``@PATH`` file; an unreadable one is an error naming the option."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"{what}: cannot read {kind} {path!r}: {e.strerror}") from e


def word_mask(words: str, dictionary, what: str) -> Tuple[Optional[Tensor], List[str]]:
    """``words`` (see ``listed_words``) as a (V,) bool mask over ``dictionary`` and the listed words;
    words absent from the dictionary are skipped and logged under ``what`` (the option); the mask
    is None when none is present."""
    listed = listed_words(words, what)
    ids = [dictionary.index(w) for w in listed]
    missing = [w for w, i in zip(listed, ids) if i == dictionary.unk()]
    if missing:
        shown = ", ".join(missing[:20]) + (f", ... ({len(missing) - 20} more)" if len(missing) > 20 else "")
        logger.info("%s: %d of %d listed words are not in the dictionary, skipped: %s",
                    what, len(missing), len(listed), shown)
    found = [i for i in ids if i != dictionary.unk()]
    if not found:
        return None, listed
    mask = torch.zeros(len(dictionary), dtype=torch.bool)
    mask[found] = True
    return mask, listed


def droppable_words(words: str, dictionary, what: str = "--entity-dropout-words") -> Optional[Tensor]:
    """The option's word list as a (V,) bool mask; None when the option is empty, an error when
    it lists no word of the dictionary."""
    if not listed_words(words, what):
        return None
    mask, listed = word_mask(words, dictionary, what)
    if mask is None:
        shown = listed[:10] + (["..."] if len(listed) > 10 else [])
        raise ValueError(f"{what}: none of {shown} is in the dictionary ({len(dictionary)} words); "
                         "give words of the training data")
    return mask


def dropout_groups(groups: str, dictionary) -> Optional[Tensor]:
    """--entity-dropout-groups (';'-separated groups, or @FILE with one group of whitespace-separated
    words per line) as a (G, V) bool mask over ``dictionary``; None when empty.  A group
    with no word of the dictionary (task 1 has no objects) is skipped and logged, as are words
    absent from it; no group left is an error."""
    groups = (groups or "").strip()
    if groups.startswith("@"):                       # a file: one group per line (prepare qa's word_classes.txt)
        text = option_file(groups[1:], "--entity-dropout-groups", "the groups file")
        listed = [",".join(line.split()) for line in text.splitlines() if line.strip()]
    else:
        listed = [g.strip() for g in groups.split(";") if g.strip()]
    if not listed:
        return None
    rows = [word_mask(g, dictionary, f"--entity-dropout-groups: group {k + 1}")[0] for k, g in enumerate(listed)]
    rows = [r for r in rows if r is not None]
    if not rows:
        raise ValueError(f"--entity-dropout-groups: no group has a word of the dictionary ({len(dictionary)} "
                         f"words): {groups!r}; give words of the training data")
    return torch.stack(rows)


@dataclass
class EntityDropoutConfig(FairseqDataclass):
    """The entity-dropout options (``cfg.entity_drop`` of tpr_rnn / stpr and tp_transformer)."""
    entity_dropout: float = field(default=0.0, metadata={
        "help": "training only (ours): per example, every distinct context word is treated as unseen "
                "with this probability: its semantic embedding and its output logit read as zero (and, "
                "in tp_transformer, its α as the initial one), as the zero-shot test does for words "
                "absent from train (docs/qa.md); tp_transformer needs --symbolic-embeddings "
                "or --symbolic-output"})
    entity_dropout_story: float = field(default=0.0, metadata={
        "help": "training only (ours): per example, with this probability every context word is "
                "treated as unseen at once (the all-new zero-shot test), on top of --entity-dropout's "
                "per-word draws; alone it also turns the dropout path on (docs/qa.md)"})
    entity_dropout_random_rate: float = field(default=0.0, metadata={
        "help": "training only (ours): per example, a rate r ~ U(0, R) is drawn and each context word "
                "is treated as unseen with probability max(--entity-dropout, r), so training sees "
                "every number of new words at once, not mostly 0-1 (P) or all (story); alone it "
                "also turns the dropout path on (docs/qa.md)"})
    entity_dropout_words: str = field(default="", metadata={
        "help": "training only (ours): the words entity dropout may pick (e.g. the task's people, "
                "rooms and objects), comma-separated or @FILE (whitespace-separated words); the "
                "per-word, story and random-rate draws are made as without it and then kept only on "
                "these words, so story dropout shows exactly the all-new test (entities new, verbs and "
                "function words known). Empty: every context word. Listed words absent from the "
                "dictionary are skipped; none present is an error (docs/qa.md)"})
    entity_dropout_type: float = field(default=0.0, metadata={
        "help": "training only (ours): per example, with this probability one group of "
                "--entity-dropout-groups is drawn uniformly (whether or not the example has words of "
                "it) and every context word of it is treated as unseen at once (e.g. all the people, "
                "rooms and objects known: the 'people' zero-shot test), on top of the other draws "
                "and, like them, kept on --entity-dropout-words when that is given; alone it also "
                "turns the dropout path on (docs/qa.md)"})
    entity_dropout_groups: str = field(default="", metadata={
        "help": "training only (ours): the groups --entity-dropout-type draws from, ';'-separated "
                "lists of comma-separated words, e.g. 'mary,john;kitchen,garden;milk', or @FILE, one "
                "group per line (e.g. the word_classes.txt of prepare qa, docs/qa.md). Words and "
                "groups absent from the dictionary are skipped (logged); none left is an error"})
    entity_dropout_learn: bool = field(default=False, metadata={
        "help": "training only (ours): learn which words entity dropout may pick, instead of a list: "
                "every context word starts droppable; a word stops being droppable once the examples "
                "that dropped it have a running mean loss more than --entity-dropout-learn-margin "
                "nats above those that kept it (it carries meaning the symbols cannot replace, e.g. "
                "'dropped' against 'picked'), and becomes droppable again when that gap closes. The "
                "story and type draws are kept on the droppable words; the others are still picked "
                "per word with --entity-dropout-learn-explore, so their gap stays measured. Only the "
                "examples without a story or type draw are measured (their picks are independent per "
                "word); not with --entity-dropout-random-rate. Needs --task babi_qa (it hands each batch's losses to the model); "
                "not with --entity-dropout-words (docs/qa.md)"})
    entity_dropout_learn_margin: float = field(default=0.05, metadata={
        "help": "with --entity-dropout-learn: the gap in mean per-example loss (nats) between the "
                "examples that dropped a word and those that kept it above which the word is not "
                "droppable"})
    entity_dropout_learn_explore: float = field(default=0.02, metadata={
        "help": "with --entity-dropout-learn: the per-word rate at which a word that is not droppable "
                "is still dropped, so its loss gap keeps being measured"})
    entity_dropout_learn_window: int = field(default=200, metadata={
        "help": "with --entity-dropout-learn: the running means forget with a time constant of this "
                "many updates; a word needs 30 examples that dropped it (counted with the same "
                "forgetting) before its gap can exclude it"})


RATES = ("entity_dropout", "entity_dropout_story", "entity_dropout_random_rate", "entity_dropout_type")


def dropout_rate(cfg: EntityDropoutConfig) -> float:
    """The largest of the rates of ``cfg``; 0 when entity dropout is off."""
    return max(getattr(cfg, name) for name in RATES)


class WordCosts(nn.Module):
    """--entity-dropout-learn's statistics: per word, running sums of the per-example loss and of
    the number of examples, over the examples whose context holds the word, split by whether
    entity dropout picked it.  All four decay by 1 - 1/window per observed batch.

        stats[0] Σ loss, dropped     stats[1] n, dropped
        stats[2] Σ loss, kept        stats[3] n, kept

    A word is droppable while it has fewer than ``MIN_DROPPED`` (decayed) dropped examples, or while
    mean(dropped) - mean(kept) <= margin.  The picks are independent per word, so the gap
    estimates the word's own cost averaged over the others' draws.  ``stats`` is saved with the
    model (a resumed run keeps what it learnt); a checkpoint read with a larger dictionary (the
    zero-shot test adds the unseen words) gets zero rows for the new words."""

    MIN_DROPPED = 30.0

    def __init__(self, vocab_size: int, margin: float, window: int):
        super().__init__()
        if window < 1:
            raise ValueError(f"--entity-dropout-learn-window must be >= 1, got {window}")
        if margin < 0.0:
            raise ValueError(f"--entity-dropout-learn-margin must be >= 0, got {margin}")
        self.margin, self.window = margin, window
        self.register_buffer("stats", torch.zeros(4, vocab_size))

    def _gap(self) -> Tensor:
        """(V,) mean(dropped) - mean(kept), an empty mean read as 0."""
        s = self.stats
        return s[0] / s[1].clamp(min=1e-6) - s[2] / s[3].clamp(min=1e-6)

    def droppable(self) -> Tensor:
        """(V,) bool: the words dropout may pick now."""
        return (self.stats[1] < self.MIN_DROPPED) | (self._gap() <= self.margin)

    def gaps(self) -> Tensor:
        """(V,) the loss gap (nats) of every word, NaN for a word never dropped or never kept."""
        s = self.stats
        return torch.where((s[1] > 0) & (s[3] > 0), self._gap(), torch.full_like(s[0], float("nan")))

    @torch.no_grad()
    def observe(self, loss: Tensor, picked: Tensor, vocab: Tensor, real: Tensor) -> None:
        """``loss`` (B,) per-example loss; ``picked``, ``real`` (B, m) bool (dropped; a real slot),
        ``vocab`` (B, m) the slots' word ids."""
        self.stats.mul_(1.0 - 1.0 / self.window)
        per_slot = loss.detach().to(self.stats.dtype)[:, None].expand_as(vocab)          # (B, m)
        for k, sel in ((0, picked & real), (2, ~picked & real)):
            ids = vocab[sel]
            self.stats[k].index_add_(0, ids, per_slot[sel])
            self.stats[k + 1].index_add_(0, ids, torch.ones_like(per_slot[sel]))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        key = prefix + "stats"
        saved = state_dict.get(key)
        if saved is not None and saved.shape != self.stats.shape and saved.size(0) == 4:
            fitted = torch.zeros_like(self.stats)                 # new words: no statistics yet
            n = min(saved.size(1), fitted.size(1))
            fitted[:, :n] = saved[:, :n]
            state_dict[key] = fitted
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class EntityDropout(nn.Module):
    """The words treated as unseen in each example of a training batch (the module docstring).
    Its word masks are buffers rebuilt from the config at every build, never saved, so a
    dictionary extended at test time is fine; a checkpoint holds only --entity-dropout-learn's
    statistics (``costs``, WordCosts), which read into an extended dictionary too."""

    def __init__(self, cfg: EntityDropoutConfig, dictionary):
        super().__init__()
        for name in RATES:
            if not 0.0 <= getattr(cfg, name) <= 1.0:
                raise ValueError(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(cfg, name)}")
        self.cfg = cfg
        self.vocab_size = len(dictionary)
        # (V,) bool: the words it may pick; None = every context word
        self.register_buffer("droppable", droppable_words(cfg.entity_dropout_words, dictionary), persistent=False)
        # (G, V) bool: the groups of --entity-dropout-type
        self.register_buffer("groups", dropout_groups(cfg.entity_dropout_groups, dictionary), persistent=False)
        if cfg.entity_dropout_type > 0.0 and self.groups is None:
            raise ValueError("--entity-dropout-type needs --entity-dropout-groups (the word groups it draws from)")
        self.costs: Optional[WordCosts] = None
        if getattr(cfg, "entity_dropout_learn", False):
            if self.droppable is not None:
                raise ValueError("--entity-dropout-learn learns the words --entity-dropout-words lists; give one of them")
            if cfg.entity_dropout_random_rate > 0.0:
                raise ValueError("--entity-dropout-learn measures each word's cost on independent picks; "
                                 "--entity-dropout-random-rate draws them together: give one of them")
            if not 0.0 <= cfg.entity_dropout_learn_explore <= 1.0:
                raise ValueError(f"--entity-dropout-learn-explore must be in [0, 1], got {cfg.entity_dropout_learn_explore}")
            self.costs = WordCosts(self.vocab_size, cfg.entity_dropout_learn_margin, cfg.entity_dropout_learn_window)
        self._words = list(dictionary.symbols)       # for the log of what --entity-dropout-learn excludes
        self._observed = 0
        self._valid_gen = None   # set only inside ``validation``: the generator of eval-mode dropout
        self._last: Optional[Tuple[Tensor, Tensor, Tensor]] = None   # the last training draw, for ``observe``

    def rate(self) -> float:
        """The largest of the rates; 0 when entity dropout is off."""
        return dropout_rate(self.cfg)

    def active(self) -> bool:
        """Dropping now: in training, or inside ``validation``, with a rate above 0."""
        return (self.training or self._valid_gen is not None) and self.rate() > 0.0

    @contextlib.contextmanager
    def validation(self, seed: int, device):
        """Inside: dropout applies in eval mode too, drawn from a generator seeded with ``seed``,
        so a validation batch sees the same masks at every validation (the babi_qa task's
        --valid-entity-dropout, docs/qa.md).  Outside, eval mode never drops."""
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        self._valid_gen = g
        try:
            yield
        finally:
            self._valid_gen = None

    def forward(self, slots: ContextSymbols, generator: Optional[torch.Generator] = None) -> Optional[Tensor]:
        """(B, V) bool, or None when not ``active``.  ``slots``: the uncapped numbering of the
        context, (B, m).  Every distinct context word (a real slot) is picked independently with
        probability max(P, r), P = --entity-dropout and r ~ U(0, --entity-dropout-random-rate) drawn
        per example (r = 0 when that is off), every one of them at once with probability
        --entity-dropout-story, and every word of one group of --entity-dropout-groups (drawn
        uniformly) at once with probability --entity-dropout-type; then kept on
        --entity-dropout-words.  Each draw beyond the per-word one is made only when its option is
        on, in this order, so runs without it keep their random stream."""
        if not self.active():
            return None
        if generator is None:
            generator = self._valid_gen        # None in training: the global RNG
        cfg, vocab = self.cfg, slots.slot_vocab
        B, dev = vocab.size(0), vocab.device
        u = torch.rand(vocab.shape, generator=generator, device=dev)                             # (B, m)
        whole = None
        if cfg.entity_dropout_story > 0.0:
            whole = torch.rand(B, 1, generator=generator, device=dev)                            # (B, 1)
        rate = torch.full((B, 1), cfg.entity_dropout, device=dev)                                # (B, 1)
        if cfg.entity_dropout_random_rate > 0.0:
            r = torch.rand(B, 1, generator=generator, device=dev) * cfg.entity_dropout_random_rate
            rate = torch.maximum(rate, r)
        # --entity-dropout-learn: the words droppable now, per slot; the others at the explore rate
        ok = None if self.costs is None else self.costs.droppable()[vocab]                      # (B, m)
        picked = u < (rate if ok is None else torch.where(ok, rate, cfg.entity_dropout_learn_explore))
        many = torch.zeros_like(picked)                # the draws of many words at once
        if whole is not None:
            many = many | (whole < cfg.entity_dropout_story)
        if cfg.entity_dropout_type > 0.0:
            on = torch.rand(B, 1, generator=generator, device=dev) < cfg.entity_dropout_type      # (B, 1)
            k = torch.randint(self.groups.size(0), (B,), generator=generator, device=dev)         # (B,)
            many = many | (on & self.groups[k].gather(1, vocab))                                  # (B, m)
        picked = (picked | (many if ok is None else many & ok)) & slots.slot_mask
        if self.droppable is not None:                 # same draws, kept on the listed words only
            picked = picked & self.droppable[vocab]
        if self.costs is not None and self.training:
            # only the examples whose picks were independent per word teach the costs: a story or
            # type draw drops many words at once, and a drawn rate makes a word's drop go with many
            # others', and either would charge each word with the loss of all of them
            alone = ~many.any(1)                                                                  # (B,)
            self._last = (picked, vocab, slots.slot_mask & alone[:, None])
        b, j = picked.nonzero(as_tuple=True)
        drop = torch.zeros(B, self.vocab_size, dtype=torch.bool, device=dev)
        drop[b, vocab[b, j]] = True
        return drop

    def observe(self, loss: Tensor) -> None:
        """--entity-dropout-learn: ``loss`` (B,), the per-example loss of the batch of the last
        training draw, updates the word costs (the babi_qa task calls it after each training
        forward).  Without a pending draw (off, eval mode) it does nothing."""
        if self.costs is None or self._last is None:
            return
        picked, vocab, real = self._last
        self._last = None
        if loss.shape != picked.shape[:1]:
            raise ValueError(f"entity dropout: {loss.numel()} per-example losses for a batch of {picked.size(0)}")
        self.costs.observe(loss, picked, vocab, real)
        self._observed += 1
        if self._observed % self.costs.window == 0:
            logger.info("entity dropout: %s", self.learned_summary())
            logger.info("entity dropout: loss gaps %s", self.gap_table())

    def gap_table(self) -> str:
        """Every measured word with its loss gap, smallest first (the training log)."""
        assert self.costs is not None
        gap = self.costs.gaps()
        order = [i for i in gap.argsort().tolist() if not torch.isnan(gap[i]) and i < len(self._words)]
        return ", ".join(f"{self._words[i]} {gap[i].item():+.3f}" for i in order)

    def learned_summary(self) -> str:
        """One line: the words --entity-dropout-learn does not drop now, with their loss gaps."""
        assert self.costs is not None
        seen = self.costs.stats[1] + self.costs.stats[3] > 0
        ok, gap = self.costs.droppable(), self.costs.gaps()
        out = [f"{self._words[i]} {gap[i].item():+.3f}" for i in (seen & ~ok).nonzero().flatten().tolist()
               if i < len(self._words)]
        return (f"{int((seen & ok).sum())} of {int(seen.sum())} context words droppable; not: "
                + (", ".join(out) if out else "none"))
