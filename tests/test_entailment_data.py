"""Entailment reader, generator labels vs an independent brute force, split hygiene."""
import dataclasses
import itertools

import pytest

from data_prep.entailment_data import (DEFAULT_SPECS, FormulaError, generate_splits, heuristic_accuracy,
                                       parse_formula, read_file, to_string, write_file)


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


@pytest.fixture(scope="module")
def splits():
    specs = {k: dataclasses.replace(v, size=120) for k, v in DEFAULT_SPECS.items()}
    return generate_splits(specs, seed=3)


def test_generator_labels_match_brute_force(splits):
    n = 0
    for split, exs in splits.items():
        for ex in exs[:: (1 if split != "test_massive" else 6)]:
            assert int(brute_force_entails(ex.a, ex.b)) == ex.label, (split, ex)
            n += 1
    assert n > 500


def test_splits_disjoint_balanced_parseable(splits):
    seen = {}
    for split, exs in splits.items():
        assert len(exs) == 120
        assert sum(e.label for e in exs) == 60
        for e in exs:
            assert to_string(parse_formula(e.a)) == e.a and to_string(parse_formula(e.b)) == e.b
            assert (e.a, e.b) not in seen, (split, seen.get((e.a, e.b)))
            seen[(e.a, e.b)] = split
    # harder splits use more variables and longer formulas
    mean_len = {s: sum(len(e.a) for e in exs) / len(exs) for s, exs in splits.items()}
    assert mean_len["test_easy"] < mean_len["test_hard"] < mean_len["test_big"] < mean_len["test_massive"]
    # H1 and H2 are uninformative by construction
    h1, h2, h3 = heuristic_accuracy(splits["validate"])
    assert h1 == 50.0 and h2 == 50.0


def test_generator_deterministic():
    specs = {"train": dataclasses.replace(DEFAULT_SPECS["train"], size=20)}
    assert generate_splits(specs, seed=1) == generate_splits(specs, seed=1)


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
    import data_prep.entailment_data as ed
    from data_prep.entailment_data import SplitSpec
    monkeypatch.setattr(ed, "LETTERS", "ab")        # few distinct formulas: collisions are certain
    specs = {"train": SplitSpec(300, 2, 1, 2), "validate": SplitSpec(100, 2, 1, 2)}
    out = generate_splits(specs, seed=0)
    pairs = [(e.a, e.b) for exs in out.values() for e in exs]
    assert len(pairs) == 400 == len(set(pairs))
