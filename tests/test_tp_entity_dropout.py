"""--entity-dropout on the symbolic tp_transformer (ours, issue 23 part 3).

Checked against the zero-shot test path it imitates: in training mode with every listed context
word dropped, each example's probabilities must equal those of the same weights in eval mode
after ``set_unseen(that example's listed context words)``, the paper's protocol (zero E rows in
the encoder and decoder inputs and in the output projection), with those words' α at their
initial value as for a never-trained word.  That path shares no code with the dropout mask."""
import copy

import pytest
import torch

from nesyseq.plugins.layers.entity_dropout import droppable_words, listed_words
from nesyseq.plugins.layers.symbolic import context_symbols
from tests.qa_helpers import NAMES, encode, make_dict
from tests.test_symbolic_transformer import BOTH, PREFIX, STORIES, _prev, build

LISTED = NAMES + ["kitchen"]


def _probs(model, d, src):
    prev = _prev(d, src.size(0))
    out = model(src, src.ne(d.pad()).sum(1), prev)
    return model.get_normalized_probs(out, log_probs=False).double()


def _context_listed(d, text):
    return sorted({d.index(w) for w in text.split() if w in LISTED})


@pytest.mark.parametrize("flags", [BOTH, dict(symbolic_embeddings=True), dict(symbolic_output=True)])
@pytest.mark.parametrize("zero_alpha", [False, True])
def test_all_dropped_equals_the_zero_shot_path_per_example(flags, zero_alpha):
    model, d = build(**flags, tie=False, entity_dropout=1.0, entity_dropout_words=",".join(LISTED),
                     zero_unseen_alpha=zero_alpha)
    src = encode(d, STORIES)
    got = _probs(model.train(), d, src)
    for b, text in enumerate(STORIES):
        ref_model = copy.deepcopy(model).eval()
        ids = _context_listed(d, text)
        if ref_model.encoder.alpha.learned:          # a never-trained word keeps its initial α logit
            with torch.no_grad():
                ref_model.encoder.alpha.alpha_logit[ids] = ref_model.encoder.alpha.INIT_LOGIT
        ref_model.set_unseen(ids)
        ref = _probs(ref_model, d, src[b: b + 1])[0]
        torch.testing.assert_close(got[b], ref, rtol=0, atol=1e-12)
        plain = _probs(copy.deepcopy(model).eval(), d, src[b: b + 1])[0]
        assert (plain - ref).abs().max() > 1e-3      # dropping changes the answer distribution


def test_off_in_eval_and_at_rate_zero():
    model, d = build(**BOTH, entity_dropout=1.0)
    zero, _ = build(**BOTH, entity_dropout=0.0)
    src = encode(d, STORIES)
    with torch.no_grad():
        torch.testing.assert_close(_probs(model.eval(), d, src), _probs(zero.eval(), d, src), rtol=0, atol=0)
        torch.testing.assert_close(_probs(zero.train(), d, src), _probs(zero.eval(), d, src), rtol=0, atol=0)


def test_each_listed_context_word_is_dropped_with_probability_p():
    model, d = build(**BOTH, entity_dropout=0.3, entity_dropout_words="mary,john,kitchen")
    enc = model.encoder.train()
    src = encode(d, STORIES)
    slots = context_symbols(src, enc.symbol_ignore, d.pad())
    torch.manual_seed(1)
    n = 4000
    counts = sum(enc.entity_drop(slots).double() for _ in range(n)) / n        # (B, V)
    in_context = [{d.index(w) for w in t.split()} for t in STORIES]
    for b in range(len(STORIES)):
        for w in range(len(d)):
            listed = d[w] in ("mary", "john", "kitchen") and w in in_context[b]
            if listed:
                assert abs(counts[b, w] - 0.3) < 0.03, (b, d[w], counts[b, w])
            else:
                assert counts[b, w] == 0, (b, d[w])


def test_every_source_word_when_no_list():
    model, d = build(**BOTH, entity_dropout=1.0)
    enc = model.encoder.train()
    src = encode(d, STORIES)
    drop = enc.entity_drop(context_symbols(src, enc.symbol_ignore, d.pad()))
    for b, text in enumerate(STORIES):
        want = {d.index(w) for w in text.split()} - {d.index("."), d.index("?")}
        assert set(drop[b].nonzero().flatten().tolist()) == want


def test_word_list_from_a_file(tmp_path):
    d = make_dict()
    f = tmp_path / "names.txt"
    f.write_text("mary john\nkitchen\nnobody\n")
    assert listed_words(f"@{f}", "--x") == ["mary", "john", "kitchen", "nobody"]
    torch.testing.assert_close(droppable_words(f"@{f}", d), droppable_words("mary,john,kitchen", d))
    model, _ = build(**BOTH, entity_dropout=0.5, entity_dropout_words=f"@{f}")
    assert set(model.encoder.droppable.nonzero().flatten().tolist()) == {d.index(w) for w in ("mary", "john", "kitchen")}
    with pytest.raises(ValueError, match=r"--entity-dropout-words: cannot read the word list '.*missing\.txt'"):
        build(**BOTH, entity_dropout=0.5, entity_dropout_words=f"@{tmp_path / 'missing.txt'}")
    with pytest.raises(ValueError, match="--entity-dropout-words: none of"):
        build(**BOTH, entity_dropout=0.5, entity_dropout_words="zzz,nobody")


def test_options_are_checked():
    with pytest.raises(ValueError, match="--entity-dropout needs --symbolic-embeddings"):
        build(entity_dropout=0.2)
    with pytest.raises(ValueError, match=r"--entity-dropout must be in \[0, 1\]"):
        build(**BOTH, entity_dropout=1.5)


def test_dropped_words_get_no_gradient_through_their_rows():
    """A dropped word's E row and α logit get no gradient from the example that drops it (its
    input rows, decoder inputs included, and its output row all read as zero)."""
    model, d = build(**BOTH, tie=False, entity_dropout=1.0, entity_dropout_words="mary,john,kitchen")
    src = encode(d, STORIES[:1])                     # the story with all three words in its context
    p = _probs(model.train(), d, src)
    p.log().sum().backward()
    E, a = model.encoder.embedding.embed_tokens.weight, model.encoder.alpha.alpha_logit
    for w in ("mary", "john", "kitchen"):
        assert E.grad[d.index(w)].abs().max() == 0 and a.grad[d.index(w)] == 0, w
    for w in ("garden", "moved"):
        assert E.grad[d.index(w)].abs().max() > 0, w
    assert PREFIX.split()[0] == "john"               # a dropped word is also a decoder input here
    assert p[0, 2, d.index("john")] > 0              # and a possible output (through the symbolic part)
