"""``nesyseq evaluate qa --checkpoint CKPT --babi-file FILE``: a trained checkpoint on a bAbI-format
file whose people, rooms and objects are all new (tests/fixtures/qa/all_new_task2.txt).

Checked: the mapping, not accuracy.  New words get new ids (never <unk>), zero semantic embedding
and output rows, α at its init; the unseen counts against a brute-force count from the
checkpoint's dict.src.txt / unseen.txt; and the external path gives the same probabilities as
the in-dictionary path: the file with each new word renamed into a word that is in the
dictionary but unseen in training (a zero-shot test word of ``prepare qa``)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nesyseq.data_prep.qa_babi import tokenize
from nesyseq.common.errors import UserError
from nesyseq.common.fairseq_cli import USER_DIR, fairseq_bin

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "qa" / "all_new_task2.txt"
MALFORMED = REPO / "tests" / "fixtures" / "qa" / "malformed_missing_tab.txt"
NEW = {"zorba": "person", "quilla": "person", "wendolyn": "person", "observatory": "room",
       "greenhouse": "room", "boathouse": "room", "lantern": "object", "compass": "object", "teapot": "object"}


def _run(cmd):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    p = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{cmd[0]} failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p.stdout


@pytest.fixture(scope="session", params=["smn_babi", pytest.param("memnet_babi", marks=pytest.mark.slow)])
def trained(request, tmp_path_factory):
    """A tiny task-2 checkpoint (30 updates) whose dictionary also holds the zero-shot test words."""
    tmp = tmp_path_factory.mktemp(request.param)
    from nesyseq.data_prep.qa_pipeline import prepare_qa

    prepare_qa(tmp / "d", generate=True, tasks="2", zero_shot=["rooms", "objects", "people"], num_names=4,
               train_stories=40, test_stories=5, seed=0)
    data = tmp / "d" / "bin" / "task2"
    _run([fairseq_bin("fairseq-train"), data, "--user-dir", USER_DIR, "--task", "babi_qa", "--arch", request.param,
          "--embed-dim", "12", "--hops", "2", "--max-story", "50", "--criterion", "cross_entropy",
          "--optimizer", "adam", "--lr", "0.01", "--batch-size", "32", "--max-update", "30",
          "--save-dir", tmp / "ck", "--no-epoch-checkpoints", "--num-workers", "0", "--cpu", "--seed", "1"])
    return tmp / "ck" / "checkpoint_best.pt", data


def _dict_words(data):
    return [l.split()[0] for l in (data / "dict.src.txt").read_text().splitlines()]


def test_all_new_words_get_new_ids_with_zero_semantic_rows(trained):
    from nesyseq.evaluations.qa_external import load_with_words

    ckpt, data = trained
    words = tokenize(FIXTURE.read_text())
    model, task, new_words, _ = load_with_words(ckpt, list(dict.fromkeys(words)), str(data))
    d = task.source_dictionary
    assert set(NEW) <= set(new_words) and set(new_words) == set(words) - set(_dict_words(data))
    old_size = len(d) - len(new_words)
    ids = torch.tensor([d.index(w) for w in NEW])
    assert (ids >= old_size).all() and not ids.eq(d.unk()).any()
    for emb in model.encoder.A:
        assert emb.semantic_part(ids).abs().max() == 0                           # zero semantic embedding
        assert torch.equal(emb.alpha_logit[ids], torch.zeros(len(ids)))          # α at its init
        assert emb.semantic_part(torch.tensor([d.index("to")])).abs().max() > 0  # a seen word is not zeroed
    out_emb = model.encoder.A[-1]                                # output rows: Bᵀ = A^(K), read through the mask
    assert out_emb.zero_unseen and out_emb.unseen[ids].all() and not out_emb.unseen[d.index("to")]


def test_report_counts_unseen_types_and_tokens(trained):
    from nesyseq.evaluations.qa_external import evaluate_babi_file

    ckpt, data = trained
    rep = evaluate_babi_file(str(ckpt), str(FIXTURE), str(data))
    known = set(_dict_words(data))
    train_unseen = set((data / "unseen.txt").read_text().split())
    toks = []
    for line in FIXTURE.read_text().splitlines():             # brute force: question text + answer + statements
        text = line.split(" ", 1)[1].split("\t")
        toks += tokenize(text[0]) + (tokenize(text[1]) if len(text) > 1 else [])
    unseen = [w for w in toks if w not in known or w in train_unseen]
    assert rep["questions"] == 6
    assert (rep["unseen_types"], rep["unseen_tokens"]) == (len(set(unseen)), len(unseen))
    assert (rep["types"], rep["tokens"]) == (len(set(toks)), len(toks))
    assert set(NEW) <= set(rep["unseen_words"])
    assert "predictions" not in rep
    # per-question answers, in file order: each question run alone gives the same answer, and
    # together they reproduce the error against the file's answers (the reference for the error)
    from nesyseq.data_prep.qa_babi import parse_babi_file
    from nesyseq.evaluations.qa_external import load_with_words
    with_preds = evaluate_babi_file(str(ckpt), str(FIXTURE), str(data), predictions=True)
    examples = parse_babi_file(str(FIXTURE), rep["memory_size"])
    model, task, _, _ = load_with_words(ckpt, list(dict.fromkeys(tokenize(FIXTURE.read_text()))), str(data))
    d = task.source_dictionary
    probs = [_probs(model, d, [" ".join(e.source_tokens())])[0] for e in examples]
    # each answer wins by far more than a batched and a lone fp32 forward pass can differ (~1e-7),
    # so equal answers cannot come from rounding luck
    assert all(float(p.topk(2).values[0] - p.topk(2).values[1]) > 1e-5 for p in probs)   # seen: 1.5e-4, 5e-2
    alone = [d[int(p.argmax())] for p in probs]
    assert with_preds["predictions"] == alone and len(alone) == 6
    assert len({len(e.source_tokens()) for e in examples}) > 1          # the batch is reordered by length
    wrong = sum(p != e.answer for p, e in zip(alone, examples))
    assert with_preds["error"] == rep["error"] == pytest.approx(100.0 * wrong / 6)


def _probs(model, d, texts):
    from fairseq.data import LanguagePairDataset

    src = [d.encode_line(t, add_if_not_exist=False).long() for t in texts]
    ds = LanguagePairDataset(src, torch.tensor([len(s) for s in src]), d, left_pad_source=False)
    sample = ds.collater([ds[i] for i in range(len(src))])
    prev = torch.full((len(src), 1), d.eos(), dtype=torch.long)
    with torch.no_grad():
        out = model(sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"], prev)
        p = model.get_normalized_probs(out, log_probs=False)[:, 0]
    return p[sample["id"].argsort()]


def test_same_probabilities_as_the_in_dictionary_path(trained):
    """Rename every new word into a dictionary word that train never saw (unseen.txt): per-word
    parameters of the two are equal under the protocol, so p is the same up to the renaming."""
    from nesyseq.data_prep.qa_babi import parse_babi_file
    from nesyseq.evaluations.qa_external import load_with_words

    ckpt, data = trained
    train_unseen = [w for w in (data / "unseen.txt").read_text().split() if w not in NEW]
    assert len(train_unseen) >= len(NEW)
    rename = dict(zip(NEW, train_unseen))
    texts = [" ".join(e.source_tokens()) for e in parse_babi_file(str(FIXTURE))]
    renamed = [" ".join(rename.get(w, w) for w in t.split()) for t in texts]
    model, task, new_words, _ = load_with_words(ckpt, list(dict.fromkeys(" ".join(texts).split())), str(data))
    d = task.source_dictionary
    p_new = _probs(model, d, texts)
    p_in = _probs(model, d, renamed)
    perm = torch.arange(len(d))
    for a, b in rename.items():
        perm[d.index(a)], perm[d.index(b)] = d.index(b), d.index(a)
    torch.testing.assert_close(p_new, p_in[:, perm], rtol=0, atol=1e-6)
    # and the predictions equal those of the plain checkpoint (no new words) on the renamed file
    plain, ptask, none, _ = load_with_words(ckpt, [], str(data))
    assert none == []
    pred_plain = _probs(plain, ptask.source_dictionary, renamed).argmax(-1)
    back = {d.index(b): d.index(a) for a, b in rename.items()}
    pred_new = p_new.argmax(-1)
    assert [back.get(int(i), int(i)) for i in pred_plain] == pred_new.tolist()


def test_malformed_file_names_file_and_line(trained):
    from nesyseq.evaluations.qa_external import evaluate_babi_file

    ckpt, data = trained
    with pytest.raises(UserError, match=r"malformed_missing_tab\.txt:4: question line without a tab"):
        evaluate_babi_file(str(ckpt), str(MALFORMED), str(data))


@pytest.mark.slow
def test_command_line(trained, tmp_path):
    ckpt, data = trained
    out = _run([sys.executable, "-m", "nesyseq.cli.main", "evaluate", "qa", "--checkpoint", ckpt,
                "--checkpoint", ckpt, "--babi-file", FIXTURE, "--data", data, "--out", tmp_path / "rep"])
    assert "unseen types" in out and "zorba" in out and "(n=2)" in out
    assert (tmp_path / "rep" / "qa_external.json").is_file()
    rows = (tmp_path / "rep" / "qa_external.csv").read_text().splitlines()
    assert rows[0] == "file,test,questions,error,unseen_types,types,unseen_tokens,tokens" and len(rows) == 3
    assert rows[1] == rows[2] and rows[1].startswith(f"{FIXTURE},")   # the same checkpoint twice
    p = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "evaluate", "qa", "--checkpoint", str(ckpt),
                        "--babi-file", str(MALFORMED), "--data", str(data)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert p.returncode != 0 and "malformed_missing_tab.txt:4" in p.stderr and "Traceback" not in p.stderr


def test_table_over_several_checkpoints_gives_mean_and_std_per_file():
    from nesyseq.evaluations.qa_external import external_table

    def res(f, ck, err):
        return {"file": f, "checkpoint": ck, "questions": 10, "error": err, "unseen_types": 2, "types": 9,
                "unseen_tokens": 5, "tokens": 40}

    a, b = "run/raw/qa2_test.txt", "run/zero_shot/qa2_test_rooms.txt"
    text = external_table([res(a, "s0", 1.0), res(b, "s0", 30.0), res(a, "s1", 4.0), res(b, "s1", 30.0)])
    assert text.splitlines()[0].startswith("| file | test | questions | error (%) | per checkpoint (%) |")
    rows = text.splitlines()[2:]
    # by hand: a: (1 + 4) / 2 = 2.5, population std 1.5; b: 30, std 0; the original test labelled as such
    assert rows == [f"| {a} | original | 10 | 2.50 ± 1.50 (n=2) | 1.0 / 4.0 | 2 / 9 | 5 / 40 |",
                    f"| {b} | zero-shot rooms | 10 | 30.00 ± 0.00 (n=2) | 30.0 / 30.0 | 2 / 9 | 5 / 40 |"]
    assert external_table([res("a.txt", "s0", 1.0)]).splitlines()[2].startswith("| a.txt | - | 10 | 1.00 | 1.0 |")


def test_progress_lines_on_a_long_file():
    import io

    from nesyseq.evaluations.qa_external import FileProgress

    out = io.StringIO()
    show = FileProgress("[2/5] qa2_test_rooms.txt", every=0.0, stream=out)
    for done in (256, 512, 1000):
        show(done, 1000)
    show.done({"questions": 1000, "error": 0.4})
    lines = out.getvalue().splitlines()
    assert [ln.split(", ")[0] for ln in lines[:2]] == ["evaluate qa: [2/5] qa2_test_rooms.txt: 256/1000 questions",
                                                       "evaluate qa: [2/5] qa2_test_rooms.txt: 512/1000 questions"]
    assert len(lines) == 3 and lines[2].startswith("evaluate qa: [2/5] qa2_test_rooms.txt: 1000 questions, error 0.40%")
    quiet = io.StringIO()
    show = FileProgress("f", every=60.0, stream=quiet)   # a short file: only its end
    show(256, 1000)
    assert quiet.getvalue() == ""


def test_unseen_words_line_names_the_first_words_and_counts_the_rest():
    from nesyseq.evaluations.qa_external import unseen_words_line

    r = {"file": "f.txt", "unseen_words": [f"w{i}" for i in range(45)]}
    line = unseen_words_line(r, kept_in="qa_external.json", shown=40)
    assert line.startswith("f.txt: words unseen in training: w0 w1 ")
    assert "w39 ... and 5 more (all 45 in qa_external.json)" in line and "w40" not in line
    assert "45 in all; --out keeps the list" in unseen_words_line(r, shown=40)
    assert unseen_words_line({"file": "g", "unseen_words": ["a", "b"]}) == "g: words unseen in training: a b"
    assert unseen_words_line({"file": "g", "unseen_words": []}) == "g: words unseen in training: (none)"
