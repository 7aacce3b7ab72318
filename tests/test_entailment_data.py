"""Entailment reader, generator labels vs an independent brute force, split hygiene."""
import dataclasses
import itertools

import pytest

from nesyseq.data_prep.entailment_data import (DEFAULT_SPECS, HEURISTICS, Example, FormulaError, generate_splits,
                                       heuristic_accuracy, heuristic_predictions, joint_heuristic_accuracy,
                                       nnf_literals, parse_formula, read_file, to_string, write_file)


def brute_force_entails(a: str, b: str) -> bool:
    """Independent check: evaluate the strings directly with Python's eval over every assignment."""
    def py(s):
        # a tiny recursive evaluator reading the string directly (no parse tree, no bitsets)
        def ev(i, env):
            c = s[i]
            if c.isalpha():
                return env[c], i + 1
            if c == "~":
                v, j = ev(i + 2, env)
                return (not v), j + 1
            l, j = ev(i + 1, env)
            op = s[j]
            r, k = ev(j + 1, env)
            return {"&": l and r, "|": l or r, ">": (not l) or r}[op], k + 1
        return ev
    va = sorted(set(c for c in a + b if c.isalpha()))
    for bits in itertools.product([False, True], repeat=len(va)):
        env = dict(zip(va, bits))
        ea = py(a)(0, env)[0]
        eb = py(b)(0, env)[0]
        if ea and not eb:
            return False
    return True


SPLIT_SIZE = 400


@pytest.fixture(scope="module")
def splits():
    specs = {k: dataclasses.replace(v, size=SPLIT_SIZE) for k, v in DEFAULT_SPECS.items()}
    return generate_splits(specs, seed=3)


def test_generator_labels_match_brute_force(splits):
    n = 0
    for split, exs in splits.items():
        for ex in exs[:: {"test_big": 4, "test_massive": 20}.get(split, 1)]:
            assert int(brute_force_entails(ex.a, ex.b)) == ex.label, (split, ex)
            n += 1
    assert n > 1000


def test_splits_disjoint_balanced_parseable(splits):
    seen = {}
    for split, exs in splits.items():
        assert len(exs) == SPLIT_SIZE
        assert sum(e.label for e in exs) == SPLIT_SIZE // 2
        for e in exs:
            assert to_string(parse_formula(e.a)) == e.a and to_string(parse_formula(e.b)) == e.b
            assert (e.a, e.b) not in seen, (split, seen.get((e.a, e.b)))
            seen[(e.a, e.b)] = split
    # harder splits use more variables and longer formulas
    mean_len = {s: sum(len(e.a) for e in exs) / len(exs) for s, exs in splits.items()}
    assert mean_len["test_easy"] < mean_len["test_hard"] < mean_len["test_big"] < mean_len["test_massive"]


def test_heuristic_baselines_uninformative(splits):
    """Evans et al.'s H1-H3 score 47-54% on their splits; ours (and our H4) must stay within 45-55% on
    every generated split of SPLIT_SIZE pairs, also when the four are combined by a lookup table."""
    for split, exs in splits.items():
        for name, acc in zip(HEURISTICS, heuristic_accuracy(exs)):
            assert 45.0 <= acc <= 55.0, (split, name, acc)
        assert 45.0 <= joint_heuristic_accuracy(splits["train"], exs) <= 55.0, split


def test_four_tuple_structure(splits):
    """Every premise occurs as often with label 1 as with label 0, and so does every conclusion
    (Evans et al.'s four-tuples: A ⊨ B, A' ⊨ B', A ⊭ B', A' ⊭ B; a short formula may recur in two)."""
    for split, exs in splits.items():
        as_premise, as_conclusion = {}, {}
        for e in exs:
            as_premise.setdefault(e.a, []).append(e.label)
            as_conclusion.setdefault(e.b, []).append(e.label)
        for table in (as_premise, as_conclusion):
            assert all(2 * sum(labels) == len(labels) for labels in table.values()), split


# Lines of Evans et al.'s test_big.txt (google-deepmind/logical-entailment-dataset, Apache-2.0) with the
# H1-H3 columns their generator computed: the reference for our heuristic definitions.
EVANS_LINES = """\
~(~(~(((g&r)>((o>(~(m)&t))>~(m)))))),(~((o&e))&(~(~((((t&(m&z))>t)>t)))|r)),1,0,0,0
~(~(((((~(p)>~(~(u)))&j)&(q&r))&(i&f)))),~((((x&r)&p)&(~(((x|p)&(r&u)))>~(x)))),0,1,0,0
(((o>f)&(((o>~((f&o)))&f)|~(f)))|~((o&f))),~((~(~((f|~(((f&o)&o)))))&((o|o)&f))),1,1,1,0
~((~(~(((u|z)>d)))>(~(((d>(d|u))|o))&z))),~((d&~(~(~(((o>(((u>d)&d)|(z|u)))>u)))))),0,1,1,1
(((o|f)>(o&~(o)))|(~(~((f|f)))&~((f|f)))),((~(f)|(((o&o)&(o&f))&(f|~(~((o|o))))))|o),1,0,1,1
"""


def test_heuristics_match_evans_columns(tmp_path):
    p = tmp_path / "test_big.txt"
    p.write_text(EVANS_LINES)
    exs = read_file(str(p))
    assert len(exs) == 5
    for ex in exs:
        assert heuristic_predictions(ex)[:3] == tuple(int(h) for h in ex.heuristics), ex
    # NNF literals by hand: ~(p>q) = p & ~q; the antecedent of > flips, ~ flips, double ~ cancels
    assert nnf_literals(parse_formula("~((p>q))")) == {("p", True), ("q", False)}
    assert nnf_literals(parse_formula("(~(~(p))>(q|~(r)))")) == {("p", False), ("q", True), ("r", False)}
    # H1 counts variables and connectives, not parentheses or characters: len((a&b)) = 3 = len(~(~(a)))
    assert heuristic_predictions(Example("(a&b)", "~(~(a))", 1))[0] == 1
    assert heuristic_predictions(Example("~(~(a))", "((a&b)|a)", 1))[0] == 0


def test_generator_deterministic():
    specs = {"train": dataclasses.replace(DEFAULT_SPECS["train"], size=20)}
    assert generate_splits(specs, seed=1) == generate_splits(specs, seed=1)


def test_prepare_source_reads_test_exam(tmp_path):
    """Evans et al.'s test_exam.txt: textbook pairs with a lone variable as premise, double negation,
    the H columns all 0, no newline after the last line. ``prepare entailment --source`` keeps it."""
    import argparse

    from nesyseq.data_prep import entailment_cli

    src = tmp_path / "src"
    src.mkdir()
    (src / "train.txt").write_text("(p&q),p,1,1,1,1\n(p|q),p,0,1,1,1\n")
    (src / "validate").write_text("p,(p|q),1,0,0,0\n")
    (src / "test_exam.txt").write_text("z,(p>(q>p)),1,0,0,0\np,~(~(~(p))),0,0,0,0\n~(~(p)),p,1,0,0,0\n"
                                       "((p>q)&(q>r)),(p>r),1,0,0,0")
    out = tmp_path / "out"
    args = argparse.Namespace(out=str(out), source=str(src), generate=False)
    assert entailment_cli.run(args) == 0
    exam = read_file(str(out / "test_exam.txt"))
    assert [(e.a, e.b, e.label) for e in exam] == [("z", "(p>(q>p))", 1), ("p", "~(~(~(p)))", 0),
                                                   ("~(~(p))", "p", 1), ("((p>q)&(q>r))", "(p>r)", 1)]
    assert all(int(brute_force_entails(e.a, e.b)) == e.label for e in exam)
    assert "| test_exam | 4 |" in (out / "heuristics.md").read_text()
    assert sorted(f.name for f in out.iterdir()) == ["heuristics.md", "test_exam.txt", "train.txt",
                                                     "validate.txt"]


def test_reader_accepts_6_and_3_fields(tmp_path):
    p = tmp_path / "train.txt"
    p.write_text("(a&b),a,1,1,0,1\n~(a),(a|b),0\n(a>b),~((a&~(b))),1")  # last line without newline
    exs = read_file(str(p))
    assert [e.label for e in exs] == [1, 0, 1]
    assert exs[0].heuristics == (1.0, 0.0, 1.0) and exs[1].heuristics is None
    q = tmp_path / "out.txt"
    write_file(str(q), exs)
    assert [(e.a, e.b, e.label) for e in read_file(str(q))] == [(e.a, e.b, e.label) for e in exs]


@pytest.mark.parametrize("bad,why", [
    ("a&b,a,1", "formula A"),          # unparenthesised binary
    ("~a,a,1", "formula A"),           # negation operand not parenthesised
    ("(a&b),(a),1", "formula B"),      # spurious parentheses
    ("(a & b),a,1", "formula A"),      # space
    ("(a&B),a,1", "formula A"),        # upper case
    ("(a&b),a,2", "label E"),
    ("(a&b),a", "fields"),
    ("(a&b),a,1,0,0", "fields"),
    ("(a&b),a,1,x,0,0", "heuristic"),
    ("(a+b),a,1", "operator"),
])
def test_reader_rejects_with_file_and_line(tmp_path, bad, why):
    p = tmp_path / "validate.txt"
    p.write_text("(a&b),a,1\n" + bad + "\n")
    with pytest.raises(FormulaError) as err:
        read_file(str(p))
    msg = str(err.value)
    assert msg.startswith(f"{p}:2:") and why in msg and "\n" not in msg


def test_no_duplicates_even_in_a_tiny_formula_space(monkeypatch):
    import nesyseq.data_prep.entailment_data as ed
    from nesyseq.data_prep.entailment_data import SplitSpec
    monkeypatch.setattr(ed, "LETTERS", "ab")        # few distinct formulas: collisions are certain
    specs = {"train": SplitSpec(300, 2, 1, 2), "validate": SplitSpec(100, 2, 1, 2)}
    out = generate_splits(specs, seed=0)
    pairs = [(e.a, e.b) for exs in out.values() for e in exs]
    assert len(pairs) == 400 == len(set(pairs))
