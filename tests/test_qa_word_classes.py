"""Word classes from slot-filler statistics (data_prep/qa_word_classes.py): the clustering
against a plain-Python average-linkage reference, and the classes against stories whose kinds
of word are known by construction (the generator's people, rooms and objects)."""
import itertools
import random

import pytest

from nesyseq.data_prep.qa_babi import QAExample, parse_babi_lines
from nesyseq.data_prep.qa_generate import OBJECTS, ROOMS, generate_task, make_names
from nesyseq.data_prep.qa_word_classes import format_classes, signatures, word_classes


def _cos(a, b):
    dot = sum(v * b.get(k, 0.0) for k, v in a.items())
    return dot / ((sum(v * v for v in a.values()) * sum(v * v for v in b.values())) ** 0.5)


def _naive_classes(examples, threshold):
    """Average linkage, recomputed from every pair of members at every step."""
    sig = signatures(examples)
    clusters = [[w] for w in sorted(sig)]
    while len(clusters) > 1:
        s, i, j = max((sum(_cos(sig[a], sig[b]) for a in x for b in y) / (len(x) * len(y)), i, j)
                      for (i, x), (j, y) in itertools.combinations(enumerate(clusters), 2))
        if s < threshold:
            break
        clusters[i] = clusters[i] + clusters.pop(j)
    return sorted((sorted(c) for c in clusters if len(c) > 1), key=lambda c: (-len(c), c))


def test_clustering_equals_the_plain_average_linkage():
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(14)]
    examples = [QAExample(story=[[rng.choice(vocab) for _ in range(rng.randint(2, 5))] for _ in range(3)],
                          question=[rng.choice(vocab), rng.choice(vocab)], answer=rng.choice(vocab))
                for _ in range(40)]
    for threshold in (0.2, 0.35, 0.5):
        got = word_classes(examples, threshold=threshold)
        assert got == _naive_classes(examples, threshold), threshold
    assert word_classes(examples, threshold=0.2)          # the thresholds above do merge words


@pytest.mark.parametrize("task", ["1", "2", "5"])
def test_the_generators_people_rooms_and_objects_are_classes(task):
    d = generate_task(task, n_train=200, n_test=2, num_names=10, seed=0, wording="babi")
    classes = [set(c) for c in word_classes(parse_babi_lines(d["train"].splitlines(), memory_size=None))]
    assert set(make_names(10, 0)) in classes
    assert set(ROOMS[:6]) in classes
    if task != "1":
        assert set(OBJECTS[:6]) in classes
    text = format_classes([sorted(c) for c in classes])
    assert [set(line.split()) for line in text.splitlines()] == classes


def test_bad_threshold_is_named():
    with pytest.raises(ValueError, match="threshold must be in"):
        word_classes([], threshold=0.0)


def test_signature_of_a_word_is_its_context_by_hand():
    ex = [QAExample(story=[["mary", "went", "to", "the", "kitchen"], ["john", "went", "to", "the", "garden"]],
                    question=["where", "is", "mary"], answer="kitchen")]
    sig = signatures(ex)
    assert sig["kitchen"] == {"L1=the": 1.0, "L2=to the": 1.0, "R1=</s>": 1.0, "ANS": 1.0}
    assert sig["mary"] == {"L1=<s>": 0.5, "L1=is": 0.5, "L2=<s> <s>": 0.5, "L2=where is": 0.5,
                           "R1=went": 0.5, "R1=</s>": 0.5}
