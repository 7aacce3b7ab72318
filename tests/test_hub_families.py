"""``nesyseq.load`` on the families that ship no export: tiny untrained checkpoints written as
fairseq-train writes them (tests/hub_helpers.py).  References: the SentencePiece model applied by
hand, the model's own forward (log-softmax of the next token; the output LayerNorms applied to the
last layer's atoms), and ``evaluate qa --babi-file``'s predictions for a memory network."""
import json

import pytest
import torch

import nesyseq
from nesyseq.common.errors import UserError
from tests import hub_helpers as h

def one_line(fn, *args, **kwargs) -> str:
    with pytest.raises(UserError) as info:
        fn(*args, **kwargs)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_wmt_translate_encodes_as_prepare_wmt(tmp_path):
    import sentencepiece as spm

    data = h.wmt_data(tmp_path / "data")
    h.wmt_checkpoint(tmp_path / "ck" / "checkpoint_last.pt", data)
    mt = nesyseq.load(tmp_path / "ck" / "checkpoint_last.pt", data=str(data), device="cpu")
    assert mt.family == "wmt"
    sp = spm.SentencePieceProcessor(model_file=str(data / "spm.model"))
    text = "The   model  translates\ttext."
    assert mt.src_dict.string(mt.encode(text)) == " ".join(sp.encode("The model translates text.", out_type=str))
    assert isinstance(mt.translate(text, beam=2), str)
    assert len(mt.translate(["one", "two words"], beam=1)) == 2
    assert "a wmt model" in one_line(nesyseq.load, tmp_path / "ck" / "checkpoint_last.pt", family="math",
                                     data=str(data))


def test_folnet_features_of_a_layer_and_of_the_output(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\nthe dog sat\n")
    data = h.folnet_data(tmp_path / "bin", corpus)
    model = h.folnet_checkpoint(tmp_path / "ck" / "model.pt", data)
    enc = nesyseq.load(tmp_path / "ck" / "model.pt", data=str(data), device="cpu")
    out, last = enc.features("the cat sat"), enc.features(["the", "cat", "sat"], layer=-1)
    assert out.tokens == ["<s>", "the", "cat", "sat", "</s>"] and last.layer == len(model.encoder.core.stack.layers) - 1
    assert out.unary.shape == (5, 32) and out.binary.shape == (5, 5, 8)
    stack = enc.model.encoder.core.stack          # the output is the final LayerNorms of the last layer's atoms
    with torch.no_grad():
        assert torch.allclose(stack.ln1(last.unary), out.unary, atol=1e-5)
        assert torch.allclose(stack.ln2(last.binary), out.binary, atol=1e-5)
    assert not torch.allclose(enc.features("the cat sat", layer=0).unary, last.unary)
    assert "'zebra'" in one_line(enc.features, "the zebra sat")
    assert "layers 0..1" in one_line(enc.features, "the cat", layer=2)


def test_folnet_lm_score_is_the_models_next_token_log_probability(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\nthe dog sat\n")
    data = h.folnet_data(tmp_path / "bin", corpus)
    h.folnet_lm_checkpoint(tmp_path / "lm" / "model.pt", data)
    lm = nesyseq.load(tmp_path / "lm" / "model.pt", data=str(data), device="cpu")
    assert lm.family == "folnet_lm"
    hypo = lm.score("the cat sat")
    d = lm.src_dict
    ids = [d.index(w) for w in "the cat sat".split()]
    with torch.no_grad():                          # fairseq's LM scoring: source [</s>, x], target x
        logits = lm.models[0](torch.tensor([[d.eos()] + ids]))[0]
        ref = torch.log_softmax(logits.float(), -1)[0, torch.arange(3), torch.tensor(ids)]
    assert torch.allclose(hypo["positional_scores"], ref, atol=1e-5)
    assert lm.features("the cat").unary.shape == (3, 32)


def test_tpru_entails_is_a_probability_per_pair(tmp_path):
    model = h.tpru_checkpoint(tmp_path / "ck" / "checkpoint_best.pt", tmp_path / "ent")
    m = nesyseq.load(tmp_path / "ck" / "checkpoint_best.pt", device="cpu")
    pairs = [("(a&b)", "a"), ("a", "(a|b)"), ("~(c)", "(c>d)")]
    batch = m.entails(pairs)
    singles = [m.entails(p, q) for p, q in pairs]
    assert torch.allclose(torch.tensor(batch), torch.tensor(singles), atol=1e-6)
    d = m.task.dictionary
    with torch.no_grad():
        logit = model(a_tokens=torch.tensor([[d.index(c) for c in "(a&b)"]]), b_tokens=torch.tensor([[d.index("a")]]))
    assert singles[0] == pytest.approx(float(torch.sigmoid(logit)), abs=1e-6)
    assert "character 3" in one_line(m.entails, "(a+b)", "a")


@pytest.fixture(scope="module")
def smn(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("smn")
    words = ["mary", "john", "moved", "to", "the", "kitchen", "garden", "office", "where", "is", ".", "?"]
    d = h.word_dictionary(words)
    data = tmp / "bin"
    data.mkdir()
    for lang in ("src", "tgt"):
        d.save(str(data / f"dict.{lang}.txt"))
    (data / "unseen.txt").write_text("office\n")
    (data / "qa_meta.json").write_text(json.dumps({"memory_size": 3}))
    h.save_checkpoint(data / "model.pt", data, ["--task", "babi_qa", "--arch", "smn_babi", "--embed-dim", "8",
                                                "--hops", "2", "--linear-start-epochs", "0"], seed=3, perturb=0.5)
    return data


def test_smn_answer_gives_the_hop_attention_and_the_beta_split(smn, tmp_path):
    from nesyseq.evaluations.qa_external import evaluate_babi_file

    qa = nesyseq.load(smn / "model.pt", device="cpu")
    story = ["Mary moved to the kitchen.", "John moved to the garden.", "Zoe moved to the office.",
             "Mary moved to the garden."]
    a = qa.answer(story, "Where is Mary?", details=True)
    assert a.sentences == ["john moved to the garden", "zoe moved to the office", "mary moved to the garden"]
    assert len(a.attention) == 2 and all(len(row) == 3 and sum(row) == pytest.approx(1.0, abs=1e-6)
                                         for row in a.attention)
    assert abs(a.beta - 0.5) > 0.01 and a.semantic + a.symbolic == pytest.approx(a.probability, abs=1e-6)
    assert a.unseen == ["zoe", "office"]
    f = tmp_path / "one.txt"                        # evaluate qa on the same story, memory 3 from qa_meta.json
    f.write_text("".join(f"{i} {s}\n" for i, s in enumerate(story, 1)) + "5 Where is Mary?\tgarden\t4\n")
    assert evaluate_babi_file(str(smn / "model.pt"), str(f), data=str(smn), predictions=True)["predictions"] == [a.word]


def test_the_symbolic_transformer_answers_with_its_beta_split(smn, tmp_path):
    """A seq2seq QA model: the answer is the decoder's first step, its β split the decoder's."""
    from nesyseq.evaluations.qa_external import evaluate_babi_file

    h.save_checkpoint(tmp_path / "model.pt", smn, ["--task", "babi_qa", "--arch", "tp_transformer_tiny",
                                                   "--symbolic-embeddings", "--symbolic-output"],
                      seed=1, perturb=1.0)
    for name in ("dict.src.txt", "dict.tgt.txt", "unseen.txt", "qa_meta.json"):
        (tmp_path / name).write_bytes((smn / name).read_bytes())
    qa = nesyseq.load(tmp_path / "model.pt", device="cpu")
    story = ["Mary moved to the kitchen.", "Zoe moved to the garden."]
    a = qa.answer(story, "Where is Zoe?", details=True)
    assert a.attention is None and abs(a.beta - 0.5) > 0.01
    assert a.semantic + a.symbolic == pytest.approx(a.probability, abs=1e-6)
    f = tmp_path / "one.txt"
    f.write_text("1 Mary moved to the kitchen.\n2 Zoe moved to the garden.\n3 Where is Zoe?\tgarden\t2\n")
    assert evaluate_babi_file(str(tmp_path / "model.pt"), str(f), data=str(tmp_path),
                              predictions=True)["predictions"] == [a.word]
