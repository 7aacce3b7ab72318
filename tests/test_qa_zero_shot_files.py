"""``nesyseq prepare qa-zero-shot``: the paper's zero-shot test files (Table 2, Fig. 5) made by
renaming the entities of a bAbI test file.  Checked against hand-written expected files and a
brute-force token-by-token comparison with the input."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nesyseq.data_prep.qa_babi import parse_babi_lines, tokenize
from nesyseq.data_prep.qa_zero_shot import BABI_ENTITIES, REPLACEMENTS, make_zero_shot, word_map
from nesyseq.common.errors import UserError

REPO = Path(__file__).resolve().parents[1]

# bAbI task-2 style, with the released files' "there" and a capitalised question word.
TASK2 = """\
1 Mary got the milk there.
2 John moved to the bedroom.
3 Sandra went back to the kitchen.
4 Mary travelled to the hallway.
5 Where is the milk? \thallway\t1 4
1 Daniel picked up the football there.
2 Daniel journeyed to the office.
3 Where is the football? \toffice\t1 2
"""
# By hand, from the paper's list (kitchen, bedroom, office, garden, hallway, bathroom) ->
# (kitchenette, guest-room, open-space, entry, terrace, toilet).
TASK2_ROOMS = """\
1 Mary got the milk there.
2 John moved to the guest-room.
3 Sandra went back to the kitchenette.
4 Mary travelled to the terrace.
5 Where is the milk? \tterrace\t1 4
1 Daniel picked up the football there.
2 Daniel journeyed to the open-space.
3 Where is the football? \topen-space\t1 2
"""
TASK2_ALL = """\
1 Wilhelmina got the teapot there.
2 Quentin moved to the guest-room.
3 Ottilie went back to the kitchenette.
4 Wilhelmina travelled to the terrace.
5 Where is the teapot? \tterrace\t1 4
1 Bartholomew picked up the compass there.
2 Bartholomew journeyed to the open-space.
3 Where is the compass? \topen-space\t1 2
"""
# task 5 style: people are answers too.
TASK5 = """\
1 Fred picked up the apple there.
2 Fred gave the apple to Bill.
3 Who gave the apple to Bill? \tFred\t2
4 Jeff went to the garden.
5 What did Fred give to Bill? \tapple\t2
"""


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_rooms_and_all_match_the_hand_written_files(tmp_path):
    src = _write(tmp_path, "qa2_test.txt", TASK2)
    paths = make_zero_shot(str(src), ["rooms", "all"], str(tmp_path / "zs"))
    assert [Path(p).name for p in paths] == ["qa2_test_rooms.txt", "qa2_test_all.txt"]
    assert Path(paths[0]).read_text() == TASK2_ROOMS
    assert Path(paths[1]).read_text() == TASK2_ALL


@pytest.mark.parametrize("kind", ["rooms", "objects", "people", "all"])
def test_each_token_renamed_by_its_kind_and_nothing_else(tmp_path, kind):
    """Brute force over the lines: ids, tabs and supporting facts equal; each token equal to the
    input's or its replacement (capitalisation kept); no entity of the kind left; the parse of the
    output has the same stories, with answers renamed."""
    text = TASK2 + TASK5
    src = _write(tmp_path, "mixed_test.txt", text)
    out = Path(make_zero_shot(str(src), [kind], str(tmp_path / "zs"))[0])
    kinds = ("rooms", "objects", "people") if kind == "all" else (kind,)
    old_words = {w for k in kinds for w in BABI_ENTITIES[k]}
    new_of = {o: n for k in kinds for o, n in zip(BABI_ENTITIES[k], REPLACEMENTS[k])}
    changed = 0
    for a, b in zip(text.splitlines(), out.read_text().splitlines(), strict=True):
        ta, tb = re.split(r"([ \t.?])", a), re.split(r"([ \t.?])", b)
        assert len(ta) == len(tb)
        for x, y in zip(ta, tb):
            if x.lower() in old_words:
                want = new_of[x.lower()]
                assert y == (want.capitalize() if x[0].isupper() else want)
                changed += 1
            else:
                assert y == x
        assert not {t.lower() for t in tb} & old_words
    assert changed > 0
    ea, eb = parse_babi_lines(text.splitlines(), "a", None), parse_babi_lines(out.read_text().splitlines(), "b", None)
    assert [e.supporting for e in ea] == [e.supporting for e in eb]
    assert [new_of.get(e.answer, e.answer) for e in ea] == [e.answer for e in eb]


def test_map_json_records_the_words_present(tmp_path):
    src = _write(tmp_path, "qa5_test.txt", TASK5)
    make_zero_shot(str(src), ["people", "objects"], str(tmp_path / "zs"))
    got = json.loads((tmp_path / "zs" / "zero_shot_map.json").read_text())["qa5_test"]
    assert got == {"people": {"fred": "cornelius", "bill": "ignatius", "jeff": "leopold"},
                   "objects": {"apple": "lantern"}}
    assert word_map("rooms")["kitchen"] == "kitchenette"      # the paper's first pair


def test_kind_absent_from_the_file_is_skipped_and_none_at_all_is_an_error(tmp_path, capsys):
    task1 = _write(tmp_path, "qa1_test.txt", "1 Mary went to the kitchen.\n2 Where is Mary? \tkitchen\t1\n")
    paths = make_zero_shot(str(task1), ["objects", "rooms"], str(tmp_path / "zs"))
    assert [Path(p).name for p in paths] == ["qa1_test_rooms.txt"]
    assert "no objects split" in capsys.readouterr().err
    with pytest.raises(UserError, match=r"qa1_test\.txt: none of the bAbI entities of --kinds objects"):
        make_zero_shot(str(task1), ["objects"], str(tmp_path / "zs2"))
    assert not (tmp_path / "zs2" / "qa1_test_objects.txt").exists()


def test_bad_input_names_file_and_line(tmp_path):
    clash = _write(tmp_path, "clash.txt", "1 Mary went to the kitchen.\n2 Mary went to the terrace.\n"
                                          "3 Where is Mary? \tterrace\t2\n")
    with pytest.raises(UserError, match=r"clash\.txt:2: already holds 'terrace'"):
        make_zero_shot(str(clash), ["rooms"], str(tmp_path / "zs"))
    bad = _write(tmp_path, "bad.txt", "1 Mary went to the kitchen.\n2 Where is Mary? kitchen 1\n")
    with pytest.raises(UserError, match=r"bad\.txt:2: question line without a tab"):
        make_zero_shot(str(bad), ["rooms"], str(tmp_path / "zs"))
    with pytest.raises(UserError, match=r"nope\.txt: no such file"):
        make_zero_shot(str(tmp_path / "nope.txt"), ["rooms"], str(tmp_path / "zs"))


def test_command_writes_the_files(tmp_path):
    src = _write(tmp_path, "qa2_test.txt", TASK2)
    cmd = [sys.executable, "-m", "nesyseq.cli.main", "prepare", "qa-zero-shot", "--babi-file", str(src),
           "--kinds", "rooms", "--out", str(tmp_path / "zs")]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "zs" / "qa2_test_rooms.txt").read_text() == TASK2_ROOMS
    assert sorted(x.name for x in (tmp_path / "zs").iterdir()) == ["qa2_test_rooms.txt", "zero_shot_map.json"]
    p = subprocess.run(cmd[:-4] + ["--kinds", "planets", "--out", str(tmp_path / "zs")],
                       capture_output=True, text=True, cwd=REPO)
    assert p.returncode != 0 and "unknown kind(s) planets" in p.stderr and "Traceback" not in p.stderr


def test_renamed_words_are_new_to_a_dictionary_of_the_original(tmp_path):
    """What the evaluation sees: every renamed entity is a word the original file never had."""
    src = _write(tmp_path, "qa2_test.txt", TASK2)
    out = Path(make_zero_shot(str(src), ["all"], str(tmp_path / "zs"))[0])
    before, after = set(tokenize(TASK2)), set(tokenize(out.read_text()))
    assert after - before == {"wilhelmina", "quentin", "ottilie", "bartholomew", "guest-room", "kitchenette",
                              "terrace", "open-space", "teapot", "compass"}
