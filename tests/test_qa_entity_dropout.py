"""stpr / tpr_rnn training options of issue 23 part 1: --entity-dropout, --beta-init, --freeze-beta.

Entity dropout is checked against the zero-shot test path it imitates: a model in training mode
with every context word dropped must give, example by example, the probabilities of the same
weights in eval mode after ``set_unseen(that example's context words)`` (zero A rows and Z rows,
the paper's protocol for unseen words), a path that shares no code with the dropout mask."""
import argparse
import copy

import pytest
import torch

from nesyseq.plugins.layers.symbolic import context_symbols, lookup_phi
from nesyseq.plugins.models.qa_common import split_story
from nesyseq.plugins.models.qa_tpr import SymbolicTPRModel, TPRConfig, TPRRNNModel
from tests.qa_helpers import FakeTask, encode, make_dict, record_role_inputs

STORIES = ["mary moved to the kitchen . john moved to the garden . daniel moved to the office . where is john ?",
           "sandra moved to the garden . mary moved to the office . where is mary ?",
           "john moved to the kitchen . where is john ?"]
SPECIAL = {".", "?"}


def _build(cls, seed=0, **cfg):
    torch.manual_seed(seed)
    d = make_dict()
    model = cls.build_model(TPRConfig.from_namespace(argparse.Namespace(
        embed_dim=6, hidden_dim=7, entity_dim=5, role_dim=4, max_words=8, **cfg)),
                            FakeTask(d)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model, d


def _probs(model, src):
    prev = torch.full((src.size(0), 1), 2, dtype=torch.long)
    out = model(src, torch.full((src.size(0),), src.size(1)), prev)
    return model.get_normalized_probs(out, log_probs=False)[:, 0]


@pytest.mark.parametrize("cls", [SymbolicTPRModel, TPRRNNModel])
@pytest.mark.parametrize("rates", [dict(entity_dropout=1.0), dict(entity_dropout_story=1.0)])
def test_all_dropped_equals_the_zero_shot_path_per_example(cls, rates):
    model, d = _build(cls, **rates)
    src = encode(d, STORIES)
    got = _probs(model.train(), src)
    for b, text in enumerate(STORIES):
        ref_model = copy.deepcopy(model).eval()
        ref_model.encoder.set_unseen(sorted({d.index(w) for w in text.split()} - {d.index(w) for w in SPECIAL}))
        ref = _probs(ref_model, src[b: b + 1])[0]
        torch.testing.assert_close(got[b], ref, rtol=0, atol=1e-12)
        plain = _probs(copy.deepcopy(model).eval(), src[b: b + 1])[0]
        assert (plain - ref).abs().max() > 1e-3          # dropping changes the answer distribution


@pytest.mark.parametrize("cls", [SymbolicTPRModel, TPRRNNModel])
def test_off_in_eval_and_at_zero(cls):
    model, d = _build(cls, entity_dropout=1.0)
    src = encode(d, STORIES)
    zero, _ = _build(cls, entity_dropout=0.0)
    torch.testing.assert_close(_probs(model.eval(), src), _probs(zero.eval(), src), rtol=0, atol=0)
    torch.testing.assert_close(_probs(zero.train(), src), _probs(zero.eval(), src), rtol=0, atol=0)


def test_mask_rate_and_support():
    """Each distinct context word is picked independently with probability p; never a special
    token, never a word outside the example."""
    model, d = _build(SymbolicTPRModel, entity_dropout=0.3)
    src = encode(d, STORIES * 200)
    g = torch.Generator().manual_seed(0)
    drop = model.train().encoder.entity_dropout_mask(src, generator=g)
    words = [{d.index(w) for w in t.split()} - {d.index(w) for w in SPECIAL} for t in STORIES * 200]
    candidates = sum(len(w) for w in words)
    for b, w in enumerate(words):
        assert set(drop[b].nonzero().flatten().tolist()) <= w
    rate = drop.sum().item() / candidates
    assert abs(rate - 0.3) < 0.03, rate
    assert model.eval().encoder.entity_dropout_mask(src) is None


def test_story_dropout_drops_whole_examples():
    """--entity-dropout-story q: an example has either every context word dropped (probability q)
    or none of them; with --entity-dropout p as well, a word is dropped with probability
    q + (1 - q) p.  Without it the mask is the per-word draw alone, from the same random stream."""
    d = make_dict()
    src = encode(d, STORIES * 200)
    words = [{d.index(w) for w in t.split()} - {d.index(w) for w in SPECIAL} for t in STORIES * 200]
    model, _ = _build(SymbolicTPRModel, entity_dropout_story=0.3)
    drop = model.train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(0))
    full = 0
    for b, w in enumerate(words):
        got = set(drop[b].nonzero().flatten().tolist())
        assert got in (set(), w), (b, got, w)
        full += got == w
    assert abs(full / len(words) - 0.3) < 0.06, full / len(words)
    both, _ = _build(SymbolicTPRModel, entity_dropout=0.3, entity_dropout_story=0.3)
    drop = both.train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(1))
    rate = drop.sum().item() / sum(len(w) for w in words)
    assert abs(rate - (0.3 + 0.7 * 0.3)) < 0.04, rate
    # off: exactly u < p on the slots, u the generator's first (B, m) draw
    # (two batches in a row, so a draw added after u would show in the second)
    per_word, _ = _build(SymbolicTPRModel, entity_dropout=0.3)
    g, ref = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    slots = context_symbols(src, per_word.encoder.ignore, per_word.encoder.pad)
    for _ in range(2):
        drop = per_word.train().encoder.entity_dropout_mask(src, generator=g)
        u = torch.rand(slots.slot_vocab.shape, generator=ref)
        want = (u < 0.3) & slots.slot_mask
        for b in range(len(words)):
            assert set(drop[b].nonzero().flatten().tolist()) == set(slots.slot_vocab[b][want[b]].tolist())


def test_random_rate_spreads_the_number_of_dropped_words():
    """--entity-dropout-random-rate R: per example r ~ U(0, R), each word dropped with probability
    max(P, r).  With P = 0 and R = 1 the number k of the n distinct words dropped is uniform on
    0..n (a Beta(1, 1)-binomial), so training sees several new words at once as often as one;
    with P = 0.3 the mean rate is E max(0.3, r) = 0.3 * 0.3 + (1 - 0.09) / 2 = 0.545."""
    d = make_dict()
    src = encode(d, STORIES * 2000)
    words = [{d.index(w) for w in t.split()} - {d.index(w) for w in SPECIAL} for t in STORIES * 2000]
    model, _ = _build(SymbolicTPRModel, entity_dropout_random_rate=1.0)
    drop = model.train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(0))
    n = len(words[0])
    counts = torch.zeros(n + 1)
    for b in range(0, len(words), len(STORIES)):                # the first story, 2000 times
        assert set(drop[b].nonzero().flatten().tolist()) <= words[b]
        counts[int(drop[b].sum())] += 1
    freq = counts / counts.sum()
    assert (freq - 1.0 / (n + 1)).abs().max() < 0.03, freq     # a fixed rate would be binomial
    both, _ = _build(SymbolicTPRModel, entity_dropout=0.3, entity_dropout_random_rate=1.0)
    drop = both.train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(1))
    rate = drop.sum().item() / sum(len(w) for w in words)
    assert abs(rate - 0.545) < 0.02, rate
    # drawn after u and the story draw: with the same stream it only adds to the story-only mask
    story, _ = _build(SymbolicTPRModel, entity_dropout_story=0.3)
    story_r, _ = _build(SymbolicTPRModel, entity_dropout_story=0.3, entity_dropout_random_rate=0.5)
    a = story.train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(2))
    b = story_r.train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(2))
    assert bool((a & ~b).sum() == 0) and b.sum() > a.sum()
    assert model.eval().encoder.entity_dropout_mask(src) is None


ENTITY_WORDS = "mary,john,kitchen,garden,nobody"   # "nobody" is not in the dictionary: skipped


@pytest.mark.parametrize("cls", [SymbolicTPRModel, TPRRNNModel])
def test_entity_words_story_dropout_equals_the_all_new_entities_test(cls):
    """--entity-dropout-words W with story dropout 1: training mode equals eval mode after
    set_unseen(the example's context words that are in W), i.e. the all-new test where the
    entities are new and the verbs and function words are known."""
    model, d = _build(cls, entity_dropout_story=1.0, entity_dropout_words=ENTITY_WORDS)
    listed = {d.index(w) for w in ENTITY_WORDS.split(",")} - {d.unk()}
    src = encode(d, STORIES)
    got = _probs(model.train(), src)
    for b, text in enumerate(STORIES):
        new = sorted({d.index(w) for w in text.split()} & listed)
        assert new, text
        ref_model = copy.deepcopy(model).eval()
        ref_model.encoder.set_unseen(new)
        torch.testing.assert_close(got[b], _probs(ref_model, src[b: b + 1])[0], rtol=0, atol=1e-12)
        every = copy.deepcopy(model).eval()                # not the unrestricted story dropout
        every.encoder.set_unseen(sorted({d.index(w) for w in text.split()} - {d.index(w) for w in SPECIAL}))
        assert (got[b] - _probs(every, src[b: b + 1])[0]).abs().max() > 1e-3


def test_entity_words_keep_the_same_draws_on_the_listed_words_only():
    d = make_dict()
    src = encode(d, STORIES * 200)
    listed = torch.zeros(len(d), dtype=torch.bool)
    listed[[d.index(w) for w in ENTITY_WORDS.split(",") if d.index(w) != d.unk()]] = True
    for rates in (dict(entity_dropout=0.3, entity_dropout_story=0.3), dict(entity_dropout_random_rate=1.0)):
        every, _ = _build(SymbolicTPRModel, **rates)
        only, _ = _build(SymbolicTPRModel, entity_dropout_words=ENTITY_WORDS, **rates)
        a = every.train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(3))
        b = only.train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(3))
        assert torch.equal(b, a & listed)
        assert b.any() and (a & ~listed).any()
    with pytest.raises(ValueError, match="--entity-dropout-words: none of"):
        _build(SymbolicTPRModel, entity_dropout=0.2, entity_dropout_words="nobody, , zzz")


GROUPS = "mary,john,sandra,daniel;kitchen,garden,office,nobody"   # people; rooms ("nobody": skipped)


@pytest.mark.parametrize("cls", [SymbolicTPRModel, TPRRNNModel])
def test_type_dropout_equals_one_zero_shot_kind_per_example(cls):
    """--entity-dropout-type 1: each training example equals eval mode after set_unseen of *one*
    group's words of that example (all its people, or all its rooms), i.e. the 'people' or the
    'rooms' zero-shot test; which group, per example, is found by trying both."""
    model, d = _build(cls, entity_dropout_type=1.0, entity_dropout_groups=GROUPS)
    groups = [{d.index(w) for w in g.split(",")} - {d.unk()} for g in GROUPS.split(";")]
    src = encode(d, STORIES * 4)
    torch.manual_seed(5)
    got = _probs(model.train(), src)
    seen = set()
    for b, text in enumerate(STORIES * 4):
        words = {d.index(w) for w in text.split()}
        refs = []
        for g in groups:
            ref_model = copy.deepcopy(model).eval()
            ref_model.encoder.set_unseen(sorted(words & g))
            refs.append(_probs(ref_model, src[b: b + 1])[0])
        assert (refs[0] - refs[1]).abs().max() > 1e-3, text       # the two kinds are told apart
        hits = [k for k, r in enumerate(refs) if torch.allclose(got[b], r, rtol=0, atol=1e-12)]
        assert len(hits) == 1, (b, text)
        seen.add(hits[0])
    assert seen == {0, 1}                                          # both groups are drawn


def test_type_dropout_rate_options_and_stream():
    d = make_dict()
    src = encode(d, STORIES * 300)
    people, rooms = (encode_words(d, [g.replace(",", " ")])[0] for g in GROUPS.split(";"))
    rooms[d.unk()] = False                                   # "nobody" is not a word of the dictionary
    base, _ = _build(SymbolicTPRModel, entity_dropout=0.2, entity_dropout_story=0.3)
    typed, _ = _build(SymbolicTPRModel, entity_dropout=0.2, entity_dropout_story=0.3,
                      entity_dropout_type=0.4, entity_dropout_groups=GROUPS)
    a = base.train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(3))
    b = typed.train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a & b, a)                   # the earlier draws are kept (same stream), words only added
    added = b & ~a
    assert added.any() and not (added & ~people & ~rooms).any()   # only words of the groups are added
    # alone, at rate 0.4 with two groups: ≈ 0.4 of the examples lose words, ≈ 0.2 all their people
    only, _ = _build(SymbolicTPRModel, entity_dropout_type=0.4, entity_dropout_groups=GROUPS)
    c = only.train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(4))
    assert torch.equal(c, only.encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(4)))
    has = encode_words(d, STORIES * 300)
    assert abs(c.any(1).float().mean().item() - 0.4) < 0.06
    all_people = (c & people).sum(1) == (has & people).sum(1)
    assert abs(all_people.float().mean().item() - 0.2) < 0.05
    assert not ((c & people).any(1) & (c & ~people).any(1)).any()        # one group per example
    with pytest.raises(ValueError, match="--entity-dropout-type needs --entity-dropout-groups"):
        _build(SymbolicTPRModel, entity_dropout_type=0.3)
    with pytest.raises(ValueError, match="--entity-dropout-groups: no group has a word"):
        _build(SymbolicTPRModel, entity_dropout_type=0.3, entity_dropout_groups="zzz;nobody,zzz")
    # a group absent from the data (task 1 has no objects) is skipped, the others kept
    skipped, _ = _build(SymbolicTPRModel, entity_dropout_type=0.3, entity_dropout_groups=GROUPS + ";lantern,teapot")
    assert skipped.encoder.entity_dropout.groups.shape == (2, len(d))
    with pytest.raises(ValueError, match="--entity-dropout-type must"):
        _build(SymbolicTPRModel, entity_dropout_type=1.5, entity_dropout_groups=GROUPS)


def encode_words(d, stories):
    """(B, V) bool: the words of each story."""
    out = torch.zeros(len(stories), len(d), dtype=torch.bool)
    for b, text in enumerate(stories):
        out[b, [d.index(w) for w in text.split()]] = True
    return out


def test_beta_init_and_freeze():
    d = make_dict()
    src = encode(d, STORIES)
    tgt = torch.tensor([d.index("garden"), d.index("office"), d.index("kitchen")])
    for freeze in (False, True):
        torch.manual_seed(0)
        model = SymbolicTPRModel.build_model(TPRConfig(beta_init=-2.0, freeze_beta=freeze), FakeTask(d))
        assert abs(torch.sigmoid(model.encoder.beta_logit).item() - torch.sigmoid(torch.tensor(-2.0)).item()) < 1e-7
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
        for _ in range(3):
            loss = -torch.log(_probs(model.train(), src)[torch.arange(3), tgt]).sum()
            opt.zero_grad(); loss.backward(); opt.step()
        moved = abs(model.encoder.beta_logit.item() + 2.0)
        assert (moved == 0.0) if freeze else (moved > 0.05), (freeze, moved)
        assert "encoder.beta_logit" in model.state_dict()          # frozen β is still saved


def test_bad_entity_dropout_is_named():
    with pytest.raises(ValueError, match="--entity-dropout must"):
        _build(SymbolicTPRModel, entity_dropout=1.5)
    with pytest.raises(ValueError, match="--entity-dropout-story must"):
        _build(SymbolicTPRModel, entity_dropout_story=-0.1)
    with pytest.raises(ValueError, match="--entity-dropout-random-rate must"):
        _build(SymbolicTPRModel, entity_dropout_random_rate=1.2)


def test_init_alpha_equals_a_never_trained_word():
    """--entity-dropout-init-alpha: with every context word dropped, training mode equals eval mode
    on a copy whose context words are unseen *and* whose α logits are back at their init (0), which
    is what a word absent from train has at test time."""
    model, d = _build(SymbolicTPRModel, entity_dropout=1.0, entity_dropout_init_alpha=True)
    src = encode(d, STORIES)
    got = _probs(model.train(), src)
    keep, _ = _build(SymbolicTPRModel, entity_dropout=1.0)               # the same weights, α kept
    kept = _probs(keep.train(), src)
    for b, text in enumerate(STORIES):
        ids = sorted({d.index(w) for w in text.split()} - {d.index(w) for w in SPECIAL})
        ref_model = copy.deepcopy(model).eval()
        with torch.no_grad():
            ref_model.encoder.A.alpha_logit[torch.tensor(ids)] = 0.0
        ref_model.encoder.set_unseen(ids)
        ref = _probs(ref_model, src[b: b + 1])[0]
        torch.testing.assert_close(got[b], ref, rtol=0, atol=1e-12)
        assert (kept[b] - ref).abs().max() > 1e-4       # the learned α would give another answer


def _naive_symbolic_sentences(enc, src, gamma=None, question=False):
    """s_t's symbolic part written out word by word: Σ_j γ_j α_x e_φ(x) (eq. 13 with γ_j = 1);
    ``gamma`` defaults to the shared --symbolic-positions row; ``question``: the question's (B, m)."""
    gamma = enc.sym_pos if gamma is None else gamma
    story, q = split_story(src, enc.sent_end, enc.q_end, enc.pad, enc.eos)
    if question:
        story = q.unsqueeze(1)
    sym = context_symbols(src, enc.ignore, enc.pad).first(enc.cfg.max_symbols)
    out = torch.zeros(*story.shape[:2], sym.m, dtype=torch.float64)
    for b in range(story.size(0)):
        slot_of = {int(v): k for k, v in enumerate(sym.slot_vocab[b]) if sym.slot_mask[b, k]}
        for t in range(story.size(1)):
            for j, x in enumerate(story[b, t].tolist()):
                if x in slot_of:
                    alpha = torch.sigmoid(enc.A.alpha_logit[x]).double()
                    out[b, t, slot_of[x]] += gamma[j].double() * alpha
    return out[:, 0] if question else out


def _sentence_embeddings(enc, src):
    story, _ = split_story(src, enc.sent_end, enc.q_end, enc.pad, enc.eos)
    B, S, W = story.shape
    sym = context_symbols(src, enc.ignore, enc.pad).first(enc.cfg.max_symbols)
    phi = lookup_phi(story.view(B, S * W), sym).view(B, S, W)
    return enc._embed(story, phi, sym.m)


def test_symbolic_positions_weigh_each_word_by_its_position():
    """--symbolic-positions (ours): the symbolic part of s_t is Σ_j γ_j α_x e_φ(x), checked against
    a word-by-word loop; γ = 1 gives back the paper's model exactly."""
    model, d = _build(SymbolicTPRModel, symbolic_positions=True)
    enc = model.eval().encoder
    src = encode(d, STORIES)
    with torch.no_grad():
        enc.sym_pos.copy_(torch.linspace(0.3, 2.0, enc.sym_pos.numel()))
    sem, sym = _sentence_embeddings(enc, src)
    torch.testing.assert_close(sym, _naive_symbolic_sentences(enc, src), rtol=0, atol=1e-12)
    plain, _ = _build(SymbolicTPRModel)
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if k != "encoder.sym_pos"})
    shifted = _probs(model, src)
    with torch.no_grad():
        enc.sym_pos.fill_(1.0)
    torch.testing.assert_close(_probs(model, src), _probs(plain.eval(), src), rtol=0, atol=1e-12)
    assert (shifted - _probs(model, src)).abs().max() > 1e-4          # γ reaches the answer
    assert "encoder.sym_pos" not in plain.state_dict()                # off: the paper's parameters only


def _role_inputs(model, src):
    """The symbolic input each role MLP of ``model`` receives, and the answer probabilities."""
    return record_role_inputs(model.encoder, lambda: _probs(model, src))


def test_symbolic_positions_per_role_feed_each_mlp_its_own_row():
    """--symbolic-positions-per-role (ours): MLP k (story e1, e2, r1, r2, r3; question e, r1, r2, r3)
    reads Σ_j γ_kj α_x e_φ(x) with its own row γ_k, checked against the word-by-word sum of each row;
    every row equal to one γ gives back the shared --symbolic-positions model exactly."""
    from nesyseq.plugins.models.qa_tpr import TPREncoder

    model, d = _build(SymbolicTPRModel, symbolic_positions_per_role=True)
    enc = model.eval().encoder
    assert enc.sym_pos_roles.shape == (len(TPREncoder.ROLES), enc.cfg.max_words)
    assert not hasattr(enc, "sym_pos")
    src = encode(d, STORIES)
    with torch.no_grad():
        enc.sym_pos_roles.copy_(0.3 + 1.7 * torch.rand(enc.sym_pos_roles.shape, generator=torch.Generator().manual_seed(5)))
    inputs, per_role = _role_inputs(model, src)
    for k, name in enumerate(TPREncoder.ROLES):
        ref = _naive_symbolic_sentences(enc, src, enc.sym_pos_roles[k], question=name.startswith("q_"))
        torch.testing.assert_close(inputs[k], ref, rtol=0, atol=1e-12, msg=f"role {name}")
    shared, _ = _build(SymbolicTPRModel, symbolic_positions=True)
    state = {k: v for k, v in model.state_dict().items() if k != "encoder.sym_pos_roles"}
    row = enc.sym_pos_roles[3].detach().clone()
    shared.load_state_dict({**state, "encoder.sym_pos": row})
    with torch.no_grad():
        enc.sym_pos_roles.copy_(row.expand_as(enc.sym_pos_roles))
    torch.testing.assert_close(_probs(model, src), _probs(shared.eval(), src), rtol=0, atol=1e-12)
    assert (per_role - _probs(model, src)).abs().max() > 1e-4          # the rows reach the answer


def test_symbolic_positions_per_role_keep_equivariance():
    """Per-role γ rows are scalars per position and role, never per word: symbol-shift equivariance
    holds with every row off its init (the equivariance test of tests/test_qa_equivariance.py)."""
    from tests.test_qa_equivariance import NAMES, _answer_probs, _build_tpr, _equivariance_gap

    model, d = _build_tpr(SymbolicTPRModel, symbolic_positions_per_role=True)
    assert (model.encoder.sym_pos_roles - 1.0).abs().min() > 1e-3
    assert _equivariance_gap(model, d) < 1e-6
    p = _answer_probs(model, d, STORIES[:2])[:, [d.index(n) for n in NAMES]]
    assert (p.max(-1).values - p.min(-1).values).max() > 1e-6


# --------------------------------------------------------------------------- --valid-entity-dropout

def _valid_sample(d, src, answers):
    B = src.size(0)
    return {"id": torch.arange(B) + 5, "nsentences": B, "ntokens": B,
            "net_input": {"src_tokens": src, "src_lengths": torch.full((B,), src.size(1)),
                          "prev_output_tokens": torch.full((B, 1), d.eos(), dtype=torch.long)},
            "target": torch.tensor([[d.index(a)] for a in answers])}


def _task(d, on):
    from nesyseq.plugins.tasks.babi_qa import BabiQAConfig, BabiQATask
    return BabiQATask(BabiQAConfig(data="", valid_entity_dropout=on), d, d)


def _valid_loss(task, model, sample):
    from fairseq.criterions.cross_entropy import CrossEntropyCriterion
    loss, size, _ = task.valid_step(sample, model, CrossEntropyCriterion(task, sentence_avg=True))
    return float(loss), size


@pytest.mark.parametrize("cls", [SymbolicTPRModel, TPRRNNModel])
def test_valid_entity_dropout_is_the_training_mask_seeded_by_the_batch(cls):
    """The validation loss under --valid-entity-dropout equals, example by example, the zero-shot
    path (set_unseen of the words the *training* mask drops, drawn from a generator seeded with
    the sum of the batch's ids); it is the same at every validation, and eval mode is untouched
    outside it."""
    model, d = _build(cls, entity_dropout=0.5, entity_dropout_story=0.3)
    src = encode(d, STORIES)
    sample = _valid_sample(d, src, ["garden", "office", "kitchen"])
    seed = int(sample["id"].sum())
    drop = copy.deepcopy(model).train().encoder.entity_dropout_mask(src, generator=torch.Generator().manual_seed(seed))
    assert drop.any() and not drop.all(-1).any()         # some words dropped, never a whole row of the vocabulary
    ref = 0.0
    for b in range(src.size(0)):
        one = copy.deepcopy(model).eval()
        one.encoder.set_unseen(drop[b].nonzero().flatten().tolist())
        ref -= torch.log(_probs(one, src[b: b + 1])[0, sample["target"][b, 0]]).item()
    model.eval()
    got, size = _valid_loss(_task(d, True), model, sample)
    # the criterion sums -ln p; one batch against three single-example forwards differs by fp32
    # reassociation (2.6e-8 relative with ATEN_CPU_CAPABILITY=default), a wrong mask by > 1e-3
    assert size == 3 and got == pytest.approx(ref, rel=1e-6)
    assert _valid_loss(_task(d, True), model, sample)[0] == got                  # the same masks every time
    plain, _ = _valid_loss(_task(d, False), model, sample)
    assert abs(plain - got) > 1e-3
    assert model.encoder.entity_dropout._valid_gen is None and not model.training
    torch.testing.assert_close(_probs(model, src), _probs(copy.deepcopy(model).eval(), src), rtol=0, atol=0)


def test_valid_entity_dropout_needs_entity_dropout():
    from nesyseq.plugins.tasks.babi_qa import check_valid_entity_dropout
    from nesyseq.plugins.models.qa_memnet import MemNetConfig, MemNetModel
    check_valid_entity_dropout(_build(SymbolicTPRModel, entity_dropout_type=0.0, entity_dropout=0.1)[0])
    off, d = _build(SymbolicTPRModel)
    with pytest.raises(ValueError, match="--valid-entity-dropout: the model .*has no entity dropout"):
        check_valid_entity_dropout(off)
    with pytest.raises(ValueError, match="--valid-entity-dropout"):
        check_valid_entity_dropout(MemNetModel.build_model(MemNetConfig(embed_dim=4), FakeTask(d)))
