"""``nesyseq.load`` and ``hubconf.py`` on the shipped exports.

References, computed without the model: sympy for the math questions (ones the TP-T export is
known to get right), each bAbI story's own answer (parsed from bAbI-format text by the project's
reader), ``nesyseq evaluate qa --babi-file``'s predictions for the unseen-word protocol, the role
vectors the encoder returns itself, and the self-attention output the layer computes itself.
"""
import sys
from pathlib import Path

import pytest
import sympy
import torch

import nesyseq
from nesyseq.common.errors import UserError
from nesyseq.data_prep.qa_babi import parse_babi_file, parse_babi_lines

REPO = Path(__file__).resolve().parents[1]
QA1 = REPO / "examples" / "symbolic_qa" / "exports" / "stpr_task1"
QA2 = REPO / "examples" / "symbolic_qa" / "exports" / "stpr_task2"
TPT = REPO / "examples" / "tp_transformer" / "results" / "math_study" / "weights" / "seed2" / "tp_transformer_tiny.pt"
BABI_QA1 = sorted((REPO / "tests" / "fixtures" / "babi" / "en1k").glob("qa1_*.txt"))   # released bAbI lines

@pytest.fixture(scope="module")
def tpt():
    return nesyseq.load(TPT, device="cpu")


@pytest.fixture(scope="module")
def qa1():
    return nesyseq.load(QA1, device="cpu")


@pytest.fixture(scope="module")
def qa2():
    return nesyseq.load(QA2, device="cpu")


def one_line_error(fn, *args, **kwargs) -> str:
    with pytest.raises(UserError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert msg and "\n" not in msg and (info.value.__context__ is None or info.value.__suppress_context__)
    return msg


# --- math: sympy computes each answer; the questions are ones this export gets right (greedy)
def _compare(a, op, b):
    a, b = sympy.Rational(a), sympy.Rational(b)
    return str(bool({"bigger": a > b, "greater": a > b, "at least as big as": a >= b,
                     "at most": a <= b, "not equal to": a != b}[op]))


def _digit(place, n):
    names = ["units", "tens", "hundreds", "thousands", "ten thousands", "hundred thousands", "millions",
             "ten millions"]
    return str(sympy.ntheory.digits(n)[1:][::-1][names.index(place)])


MATH = [
    ("Is 11183 greater than 10881?", _compare("11183", "greater", "10881")),
    ("Is -3/8 bigger than -4714619?", _compare("-3/8", "bigger", "-4714619")),
    ("Is -2247498 at most -2247494?", _compare("-2247498", "at most", "-2247494")),
    ("Which is smaller: 3/4394554 or 0?", str(sympy.Min(sympy.Rational(3, 4394554), 0))),
    ("What is the thousands digit of 44855097?", _digit("thousands", 44855097)),
    ("What is the units digit of 51939434?", _digit("units", 51939434)),
]


def test_math_export_solves_questions_as_sympy_answers_them(tpt):
    questions, answers = [q for q, _ in MATH], [a for _, a in MATH]
    assert tpt.solve(questions) == answers                      # one batch, greedy
    assert tpt.solve(questions[0]) == answers[0]                # one question, a string back
    assert tpt.solve(questions[:2], beam=4) == answers[:2]


def test_math_encoding_is_prepare_math_characters(tpt):
    from nesyseq.data_prep.math_preprocess import encode_chars

    q = "Is 11183 greater than 10881?"
    ids = tpt.encode(q)
    assert tpt.src_dict.string(ids) == encode_chars(q, "q", strict=True)
    assert ids[-1] == tpt.src_dict.eos()
    msg = one_line_error(tpt.solve, "What is 7 € 5?")
    assert "'€'" in msg and "column 11" in msg


def test_roles_are_the_vectors_and_attention_the_layer_uses(tpt):
    """The returned attention, with the layer's own value and role projections, rebuilds the
    layer's self-attention output; the roles are the encoder's own return_all_roles vectors."""
    model = tpt.models[0]
    layer = model.encoder.layers[-1].self_attn
    q = "What is the units digit of 51939434?"
    ids = tpt.encode(q).unsqueeze(0)
    seen = {}
    hooks = [layer.register_forward_pre_hook(lambda m, a, k: seen.update(query=a[0]), with_kwargs=True),
             layer.register_forward_hook(lambda m, a, out: seen.update(out=out))]
    try:
        with torch.no_grad():
            roles_all = model.encoder(ids, src_lengths=torch.tensor([ids.size(1)]), return_all_roles=True)["roles"][-1]
    finally:
        for h in hooks:
            h.remove()
    H, dk, d = layer.num_heads, layer.head_dim, layer.num_heads * layer.head_dim
    got = [tpt.roles(q, layer=-1, head=h) for h in range(H)]
    assert got[0].tokens[-1] == "</s>" and "".join(got[0].tokens[:-1]) == q and got[0].layer == 1
    for h, r in enumerate(got):
        assert torch.equal(r.roles, roles_all[0, :, h * dk:(h + 1) * dk])
        assert torch.allclose(r.attention.sum(-1), torch.ones(ids.size(1)), atol=1e-6)
    with torch.no_grad():
        _q, r, _k, v = layer.in_proj(seen["query"]).split(d, dim=-1)
        vbar = torch.cat([got[h].attention @ v[0, :, h * dk:(h + 1) * dk] for h in range(H)], -1)
        rebuilt = layer.out_proj(vbar * r[0])
    assert torch.allclose(rebuilt, seen["out"][0], atol=1e-5)
    assert "heads 0..3" in one_line_error(tpt.roles, q, head=H)


# --- QA: each story's own answer, with people (and rooms, objects) the model never saw
def _questions(path_or_lines):
    if isinstance(path_or_lines, Path):
        return parse_babi_file(str(path_or_lines), None)
    return parse_babi_lines(path_or_lines.strip().splitlines(), "<story>", None)


RENAMED_T1 = """1 Zelda went to the kitchen.
2 Oscar journeyed to the bathroom.
3 Where is Zelda?\tkitchen\t1
4 Zelda travelled to the garden.
5 Where is Zelda?\tgarden\t4
6 Where is Oscar?\tbathroom\t2"""

RENAMED_T2 = """1 Zelda went to the kitchen.
2 Zelda picked up the lantern.
3 Zelda travelled to the office.
4 Where is the lantern?\toffice\t2 3
5 Oscar went to the garden.
6 Oscar grabbed the apple.
7 Oscar journeyed to the hallway.
8 Where is the apple?\thallway\t6 7"""


@pytest.mark.parametrize("source", [*BABI_QA1, RENAMED_T1], ids=[p.name for p in BABI_QA1] + ["renamed"])
def test_stpr_task1_answers_each_story_with_unseen_people(qa1, source):
    examples = _questions(source)
    for ex in examples:
        story = [" ".join(s) + "." for s in ex.story]
        assert qa1.answer(story, " ".join(ex.question) + "?") == ex.answer, ex.where


def test_stpr_task2_answers_a_story_with_unseen_people_and_objects(qa2):
    for ex in _questions(RENAMED_T2):
        a = qa2.answer([" ".join(s) for s in ex.story], " ".join(ex.question), details=True)
        assert a.word == ex.answer, ex.where
        assert {"zelda", "lantern"} <= set(a.unseen)                 # a person and an object never seen
        # the β split: the two terms the model sums, at the answer, add up to its probability
        assert 0.0 < a.beta < 1.0 and a.semantic + a.symbolic == pytest.approx(a.probability, abs=1e-6)


def test_unseen_words_are_handled_as_evaluate_qa_handles_them(qa1, tmp_path):
    """evaluate qa --babi-file on a one-story file (its new words appended at once, as answer()
    appends the words of one call) predicts what answer() answers."""
    from nesyseq.evaluations.qa_external import evaluate_babi_file

    f = tmp_path / "story.txt"
    f.write_text(RENAMED_T1 + "\n")
    report = evaluate_babi_file(str(QA1 / "model.pt"), str(f), data=str(QA1), predictions=True)
    ours = [qa1.answer([" ".join(s) for s in ex.story], " ".join(ex.question)) for ex in _questions(RENAMED_T1)]
    assert report["predictions"] == ours and {"zelda", "oscar"} <= set(report["new_to_dictionary"])


def test_story_numbering_and_one_string_read_as_the_list(qa1):
    lines = ["1 Zelda went to the kitchen.", "2 Oscar journeyed to the bathroom."]
    assert qa1.answer("\n".join(lines), "Where is Zelda?") == qa1.answer(lines, "Where is Zelda?") == "kitchen"


@pytest.mark.parametrize("story,question,needle", [
    (["Zelda went to the kitchen.", "Where is Zelda?"], "Where is Zelda?", "story line 2"),
    (["Zelda went to the kitchen.", "3 Where is Zelda?\tkitchen\t1"], "Where is Zelda?", "story line 2"),
    ([], "Where is Zelda?", "no statements"),
    ([["zelda", "went"]], "Where is Zelda?", "story line 1: expected a string"),
    (42, "Where is Zelda?", "expected a list of statements"),
    (["Zelda went to the kitchen.", "   "], "Where is Zelda?", "story line 2"),
    (["Zelda went to the kitchen."], "Where is Zelda?\tkitchen", "a tab"),
])
def test_a_malformed_story_is_a_one_line_error(qa1, story, question, needle):
    assert needle in one_line_error(qa1.answer, story, question)


def test_a_wrong_family_is_a_one_line_error():
    msg = one_line_error(nesyseq.load, TPT, family="qa")
    assert "a math model (tp_transformer_tiny), not qa" in msg
    assert "a qa model (stpr_babi), not math" in one_line_error(nesyseq.load, QA1, family="math")
    assert "expected one of" in one_line_error(nesyseq.load, QA1, family="vision")


def test_a_file_that_is_not_a_checkpoint_is_a_one_line_error(tmp_path):
    bad = tmp_path / "model.pt"
    bad.write_bytes(b"not a zip")
    assert "not a readable checkpoint" in one_line_error(nesyseq.load, bad)
    assert "no such file" in one_line_error(nesyseq.load, tmp_path / "missing.pt")


def test_torch_hub_loads_the_shipped_exports_from_a_checkout(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))          # torch.hub puts the checkout first
    monkeypatch.delitem(sys.modules, "hubconf", raising=False)
    qa = torch.hub.load(str(REPO), "stpr_babi_task1", source="local", device="cpu")
    assert qa.answer(["Zelda went to the kitchen.", "Oscar moved to the garden."], "Where is Oscar?") == "garden"
    qa2 = torch.hub.load(str(REPO), "stpr_babi_task2", source="local", device="cpu")
    assert qa2.answer(["Oscar went to the office.", "Oscar picked up the apple.", "Oscar went to the garden."],
                       "Where is the apple?") == "garden"
    math = torch.hub.load(str(REPO), "tp_transformer_math", source="local", seed=2, device="cpu")
    assert math.solve(MATH[0][0]) == MATH[0][1]
    assert "seeds 1, 2, 3" in one_line_error(torch.hub.load, str(REPO), "tp_transformer_math", source="local", seed=7)


def test_the_exports_are_small_fp16_with_a_card():
    for folder in (QA1, QA2):
        for name in ("model.pt", "dict.src.txt", "dict.tgt.txt", "unseen.txt", "qa_meta.json", "README.md"):
            assert (folder / name).is_file(), folder / name
    for path in [QA1 / "model.pt", QA2 / "model.pt", TPT]:
        assert path.stat().st_size <= 5 * 2 ** 20
        state = torch.load(str(path), map_location="cpu", weights_only=True)
        floats = [v for v in state["model"].values() if torch.is_tensor(v) and v.is_floating_point()]
        assert floats and all(v.dtype == torch.float16 for v in floats), path
    assert (TPT.parent.parent / "README.md").is_file()
