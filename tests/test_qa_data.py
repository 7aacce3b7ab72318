"""bAbI parser (hand-written fixtures, both naming schemes, every malformed case),
the bAbI-style generator, and ``nesyseq prepare qa``."""
import os
import pathlib

import pytest

from nesyseq.data_prep.qa_babi import discover_tasks, parse_babi_file, parse_babi_lines
from nesyseq.data_prep.qa_generate import OBJECTS, ROOMS, generate_task, make_names
from nesyseq.common.errors import UserError

FIX = pathlib.Path(__file__).parent / "fixtures" / "babi"


def test_parse_story_questions_and_support():
    exs = parse_babi_file(str(FIX / "en1k" / "qa1_single-supporting-fact_train.txt"))
    assert [e.answer for e in exs] == ["bathroom", "hallway", "guest-room"]
    # second question: the story so far without the earlier question line
    assert exs[1].story == [["mary", "moved", "to", "the", "bathroom"], ["john", "went", "to", "the", "hallway"],
                            ["daniel", "went", "back", "to", "the", "hallway"], ["sandra", "moved", "to", "the", "garden"]]
    assert exs[1].question == ["where", "is", "daniel"]
    assert exs[1].supporting == [2]          # line id 4 is the third statement (id 3 was a question)
    assert exs[2].story == [["sandra", "travelled", "to", "the", "guest-room"]]  # a new story starts at id 1
    assert exs[0].source_tokens() == "mary moved to the bathroom . john went to the hallway . where is mary ?".split()
    assert exs[0].where.endswith("qa1_single-supporting-fact_train.txt:3")


def test_byte_order_mark_and_crlf_read_as_plain(tmp_path):
    """A bAbI file saved by a Windows editor (UTF-8 BOM, CRLF) parses exactly as the plain one
    (before, line 1 was refused: its id read as '\\ufeff1')."""
    plain = FIX / "en1k" / "qa1_single-supporting-fact_train.txt"
    win = tmp_path / "windows.txt"
    win.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes().replace(b"\n", b"\r\n"))
    got, ref = parse_babi_file(str(win)), parse_babi_file(str(plain))
    assert [(e.story, e.question, e.answer, e.supporting) for e in got] == \
        [(e.story, e.question, e.answer, e.supporting) for e in ref]


def test_answers_with_commas_are_one_token():
    exs = parse_babi_file(str(FIX / "envalid" / "qa8_train.txt"))
    assert [e.answer for e in exs] == ["apple,football", "n,s"]
    assert exs[0].supporting == [0, 1]


def test_memory_size_keeps_most_recent():
    lines = [f"{i} P{i} went to the kitchen." for i in range(1, 8)] + ["8 Where is P2? \tkitchen\t2"]
    exs = parse_babi_lines(lines, memory_size=3)
    assert [s[0] for s in exs[0].story] == ["p5", "p6", "p7"]
    assert exs[0].supporting == [-1]         # its fact was dropped by the cap
    assert len(parse_babi_lines(lines, memory_size=None)[0].story) == 7


def test_both_naming_schemes():
    a = discover_tasks(str(FIX / "en1k"))
    assert list(a) == [1] and set(a[1]) == {"train", "test"}
    b = discover_tasks(str(FIX / "envalid"))
    assert list(b) == [8] and set(b[8]) == {"train", "valid", "test"}


@pytest.mark.parametrize("name,message", [
    ("missing_tab.txt", "missing_tab.txt:2: question line without a tab"),
    ("bad_support.txt", "bad_support.txt:2: supporting-fact id 7 names no earlier line"),
    ("support_not_number.txt", "support_not_number.txt:2: supporting-fact id 'x' is not a number"),
    ("support_is_question.txt", "support_is_question.txt:3: supporting-fact id 2 is a question line"),
    ("question_first.txt", "question_first.txt:3: question before any story sentence"),
    ("ids_backwards.txt", "ids_backwards.txt:3: line id 2 does not follow 3"),
    ("no_id.txt", "no_id.txt:1: expected 'ID text'"),
])
def test_malformed_lines_are_one_line_errors(name, message):
    with pytest.raises(UserError) as err:
        parse_babi_file(str(FIX / "malformed" / name))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_discover_errors(tmp_path):
    with pytest.raises(UserError, match="no bAbI files"):
        discover_tasks(str(tmp_path))
    (tmp_path / "qa3_three_train.txt").write_text("1 a b.\n")
    with pytest.raises(UserError, match="task 3 has no test file"):
        discover_tasks(str(tmp_path))
    (tmp_path / "qa3_train.txt").write_text("1 a b.\n")
    with pytest.raises(UserError, match="both naming schemes"):
        discover_tasks(str(tmp_path))


@pytest.mark.parametrize("task", ["1", "2", "3", "5", "b"])
def test_generator_is_deterministic_and_parses(task):
    a = generate_task(task, n_train=30, n_test=10, num_names=10, seed=3)
    assert a == generate_task(task, n_train=30, n_test=10, num_names=10, seed=3)
    assert a != generate_task(task, n_train=30, n_test=10, num_names=10, seed=4)
    tr = parse_babi_lines(a["train"].splitlines(), "train", memory_size=None)
    te = parse_babi_lines(a["test"].splitlines(), "test", memory_size=None)
    assert len(tr) == 30 * (1 if task == "b" else 5) and len(te) == 10 * (1 if task == "b" else 5)
    for e in tr + te:  # every answer is supported by the facts it cites
        assert e.supporting and all(0 <= s < len(e.story) for s in e.supporting)


@pytest.mark.parametrize("task", ["1", "2", "5"])
def test_people_and_questions_per_story_shape_every_split(task):
    """Counted on the text: each story draws --people-per-story people (bAbI's 4, task 5 3, by
    default) and names at most that many, on average more than a plain story can, and asks exactly
    --questions-per-story questions."""
    names = set(make_names(40, 0))

    def shapes(text):
        stories = ("\n" + text).split("\n1 ")[1:]
        people = [len({w.strip(".?").lower() for w in st.split()} & names) for st in stories]
        return people, [st.count("\t") // 2 for st in stories]
    plain = generate_task(task, n_train=20, n_test=10, num_names=20, seed=0)
    default = 3 if task == "5" else 4
    people, questions = shapes(plain["train"])
    assert max(people) == default and questions == [5] * 20
    big = generate_task(task, n_train=20, n_test=10, num_names=20, seed=0, zero_shot=["all"],
                        people_per_story=8, questions_per_story=10)
    for split in ("train", "test", "test_all"):
        people, questions = shapes(big[split])
        n = 20 if split == "train" else 10
        assert questions == [10] * n, split
        if split != "test_all":      # test_all's people are the unseen half of the 40 names
            assert max(people) == 8 and sum(people) / n > default, (split, people)   # more than a plain story can
    for bad, named in ((dict(people_per_story=21), "--people-per-story must be in 1..--num-names (20)"),
                       (dict(questions_per_story=0), "--questions-per-story must be >= 1")):
        with pytest.raises(UserError, match=named.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
            generate_task(task, n_train=2, n_test=2, num_names=20, **bad)


def test_babi_wording_says_there_as_the_released_files_do():
    """--wording babi: every taking ends in 'there', about one leaving in five does, and the
    default wording (no 'there') is what it was."""
    from nesyseq.data_prep.qa_generate import DROP_VERBS, GRAB_VERBS
    text = generate_task("2", n_train=300, n_test=5, num_names=10, seed=0, wording="babi")["train"]
    lines = [line.split(" ", 1)[1] for line in text.splitlines() if "\t" not in line]
    grabs = [s for s in lines if any(f" {v} the " in s for v in GRAB_VERBS)]
    drops = [s for s in lines if any(f" {v} the " in s for v in DROP_VERBS)]
    assert grabs and all(s.endswith(" there.") for s in grabs)
    share = sum(s.endswith(" there.") for s in drops) / len(drops)
    assert len(drops) > 300 and 0.1 < share < 0.3, (len(drops), share)
    plain = generate_task("2", n_train=300, n_test=5, num_names=10, seed=0)["train"]
    assert " there." not in plain
    with pytest.raises(UserError, match="--wording must be one of ours, babi"):
        generate_task("2", n_train=2, n_test=2, num_names=10, wording="shakespeare")


def _answer_by_rule(e, task):
    """Independent re-derivation of the answer from the story text."""
    if task == "1":
        who = e.question[-1]
        return [s[-1] for s in e.story if s[0] == who][-1]
    if task == "b":
        x = e.question[-1]
        return [s[-1] for s in e.story if s[0] == x][-1]


@pytest.mark.parametrize("task", ["1", "b"])
def test_generator_answers_follow_the_story(task):
    d = generate_task(task, n_train=40, n_test=5, num_names=100, k=10, seed=1)
    for e in parse_babi_lines(d["train"].splitlines(), memory_size=None):
        assert e.answer == _answer_by_rule(e, task)


def test_appendix_b_splits_do_not_overlap():
    d = generate_task("b", n_train=300, n_test=100, k=10, seed=0)
    stories = lambda t: {s for s in t.strip().split("\n1 ")}
    assert not stories(d["train"]) & stories(d["test"])


def test_names_count_and_zero_shot():
    assert len(set(make_names(10000))) == 10000
    d = generate_task("1", n_train=200, n_test=50, num_names=1000, seed=0)
    names = {e.question[-1] for e in parse_babi_lines(d["train"].splitlines(), memory_size=None)}
    assert len(names) > 100
    plain = generate_task("2", n_train=50, n_test=20, num_names=10, seed=0)
    d = generate_task("2", n_train=50, n_test=20, num_names=10, zero_shot=["rooms", "objects", "people"], seed=0)
    assert d["train"] == plain["train"] and d["test"] == plain["test"]   # one training set for Table 2
    words = lambda t: {w for e in parse_babi_lines(t.splitlines(), memory_size=None)
                       for s in e.story + [e.question, [e.answer]] for w in s}
    train_words = words(d["train"])
    assert words(d["test"]) <= train_words
    for what, pool in (("rooms", ROOMS), ("objects", OBJECTS), ("people", None)):
        z = words(d[f"test_{what}"])
        assert z - train_words, what
        if pool is not None:     # every room (object) of the split is unseen, the others are the trained ones
            assert z & set(pool) and z & set(pool) <= set(pool[6:]), what
            other = OBJECTS if what == "rooms" else ROOMS
            assert z & set(other) <= set(other[:6]), what
    test_answers = {e.answer for e in parse_babi_lines(d["test_rooms"].splitlines(), memory_size=None)}
    assert test_answers and not test_answers & train_words


def test_prepare_qa_cli(tmp_path, capsys):
    from nesyseq.cli.main import main

    assert main(["prepare", "qa", "--source", str(FIX / "envalid"), "--out", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "bin" / "task8" / "train.src-tgt.src.bin").exists()
    assert main(["prepare", "qa", "--generate", "--out", str(tmp_path / "g"), "--tasks", "1",
                 "--num-names", "10", "--zero-shot", "people,rooms", "--train-stories", "20",
                 "--test-stories", "5"]) == 0
    bin_dir = tmp_path / "g" / "bin" / "task1"
    for subset in ("test", "test_people", "test_rooms"):
        assert (bin_dir / f"{subset}.src-tgt.src.bin").exists(), subset
    assert not list(bin_dir.glob("test1.*"))
    unseen = (bin_dir / "unseen.txt").read_text().split()
    assert "cellar" in unseen or "attic" in unseen
    src_dict = (tmp_path / "g" / "bin" / "task1" / "dict.src.txt").read_text()
    assert unseen and all(f"\n{w} " in "\n" + src_dict for w in unseen)   # own entries, not <unk>
    assert main(["prepare", "qa", "--source", str(FIX / "malformed"), "--out", str(tmp_path / "m")]) == 2
    assert "no bAbI files" in capsys.readouterr().err


def test_prepare_qa_from_files_with_any_names(tmp_path, capsys):
    """--train/--test/--valid FILE take bAbI files whatever their names and give the same
    binaries as --source on the same files under bAbI's names."""
    import filecmp
    import shutil

    from nesyseq.cli.main import main

    held = tmp_path / "held-out corpus"
    held.mkdir()
    for split in ("train", "valid", "test"):
        shutil.copy(FIX / "envalid" / f"qa8_{split}.txt", held / f"lists {split} v2.babi")
    one_k = tmp_path / "onek"
    one_k.mkdir()
    shutil.copy(FIX / "en1k" / "qa1_single-supporting-fact_train.txt", one_k / "a.txt")
    shutil.copy(FIX / "en1k" / "qa1_single-supporting-fact_test.txt", one_k / "b.txt")
    for src_dir, task, files in (
            (FIX / "envalid", "8", ["--train", held / "lists train v2.babi", "--valid", held / "lists valid v2.babi",
                                    "--test", held / "lists test v2.babi"]),
            (FIX / "en1k", "1", ["--train", one_k / "a.txt", "--test", one_k / "b.txt"])):
        assert main(["prepare", "qa", "--source", str(src_dir), "--tasks", task, "--out", str(tmp_path / "s")]) == 0
        assert main(["prepare", "qa", *map(str, files), "--tasks", task, "--out", str(tmp_path / "f")]) == 0
        a, b = tmp_path / "s" / "bin" / f"task{task}", tmp_path / "f" / "bin" / f"task{task}"
        names = sorted(p.name for p in a.iterdir() if p.name != "qa_meta.json")
        assert names == sorted(p.name for p in b.iterdir() if p.name != "qa_meta.json")
        assert any(n.startswith("valid.") for n in names) and "unseen.txt" in names
        match, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
        assert not mismatch and not errors, (task, mismatch, errors)
        assert str(held if task == "8" else one_k) in (b / "qa_meta.json").read_text()
    capsys.readouterr()
    for argv, message in ((["--train", str(one_k / "a.txt"), "--tasks", "1"], "--train FILE needs --test FILE"),
                          (["--train", str(one_k / "a.txt"), "--test", str(one_k / "b.txt")], "name the task with --tasks N"),
                          (["--train", str(one_k / "a.txt"), "--test", str(one_k / "nope.txt"), "--tasks", "1"],
                           f"--test {one_k / 'nope.txt'}: no such file"),
                          (["--source", str(FIX / "en1k"), "--test", str(one_k / "b.txt")], "go with --train FILE"),
                          (["--train", str(one_k / "a.txt"), "--test", str(one_k / "b.txt"), "--tasks", "../x"],
                           "one positive number")):
        assert main(["prepare", "qa", *argv, "--out", str(tmp_path / "e")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (argv, err)
    assert not (tmp_path / "e" / "bin").exists()
    # "01" names the same task as --source's "1": same folder, same held-out valid split
    assert main(["prepare", "qa", "--train", str(one_k / "a.txt"), "--test", str(one_k / "b.txt"), "--tasks", "01",
                 "--out", str(tmp_path / "z")]) == 0
    assert filecmp.cmp(tmp_path / "z" / "bin" / "task1" / "valid.src-tgt.src.bin",
                       tmp_path / "s" / "bin" / "task1" / "valid.src-tgt.src.bin", shallow=False)


def test_generate_split_redraws_excluded_stories():
    import random

    from nesyseq.data_prep.qa_generate import generate_split

    first = generate_split("b", 20, random.Random(5), ["x0", "x1"], ["v0", "v1"], [])
    again = generate_split("b", 20, random.Random(5), ["x0", "x1"], ["v0", "v1"], [], exclude=set(first))
    assert len(again) == 20 and not set(first) & set(again)


def test_qa_report_aggregates_seeds(tmp_path):
    from nesyseq.evaluations.qa_eval import markdown, one_each, write_reports

    rows = [dict(model="smn", task="1", seed=str(s), error=str(e), names="10") for s, e in ((0, 1.0), (1, 3.0))]
    rows += [dict(model="stpr", task="2", seed="0", error="7.5", split="rooms")]
    rows += [dict(model="stpr", task=t, seed="0", error="1.0", split=sp)
             for t in ("5", "2") for sp in ("people", "original", "objects")]
    rows += [dict(model="mn", task="1", seed="0", error="2.0"), dict(model="mn", task="2", seed="0", error="50.0")]
    md = markdown(rows, "bAbI-style")
    assert "| 1 | smn | 2.0 ± 1.0 |" in md                      # mean ± population std over seeds
    assert "| rooms | 2 | 7.5 ± 0.0 |" in md
    zs = [line.split("|")[1:3] for line in md.splitlines() if line.startswith("| ") and "| 2 |" in line
          or line.startswith("| ") and "| 5 |" in line]
    assert [(a.strip(), b.strip()) for a, b in zs] == [
        ("original", "2"), ("rooms", "2"), ("objects", "2"), ("people", "2"),
        ("original", "5"), ("objects", "5"), ("people", "5")]             # Table 2 order
    assert "| mn | 2.0 ± 0.0 (n=1) | 50.0 ± 0.0 (n=1) | 26.0 | 1/2 |" in md
    paths = write_reports(rows, tmp_path, "bAbI-style")
    assert paths["curve"].exists() and paths["csv"].read_text().count("\n") == 12
    with pytest.raises(UserError, match="--seed: 2 values for 3 checkpoints"):
        one_each(["0", "1"], 3, "--seed")


def test_zero_shot_all_makes_every_entity_new():
    """``--zero-shot all``: people, rooms and objects of the split are all unseen in training,
    while train and test stay those of the plain call; the verbs and function words are shared."""
    plain = generate_task("2", n_train=50, n_test=20, num_names=10, seed=0)
    d = generate_task("2", n_train=50, n_test=20, num_names=10, zero_shot="all", seed=0)
    assert d["train"] == plain["train"] and d["test"] == plain["test"]
    exs = lambda t: parse_babi_lines(t.splitlines(), memory_size=None)
    train_words = {w for e in exs(d["train"]) for s in e.story + [e.question, [e.answer]] for w in s}
    train_people = {e.story[i][0] for e in exs(d["train"]) for i in range(len(e.story))}
    new = exs(d["test_all"])
    assert new
    for e in new:
        words = {w for s in e.story + [e.question] for w in s}
        assert words & set(ROOMS) <= set(ROOMS[6:]) and words & set(OBJECTS) <= set(OBJECTS[6:])
        assert not {s[0] for s in e.story} & train_people            # every actor is a new name
        assert e.answer not in train_words
    for e in exs(d["train"]):
        assert not {w for s in e.story for w in s} & (set(ROOMS[6:]) | set(OBJECTS[6:]))
