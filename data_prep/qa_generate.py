"""Our generator of **bAbI-style** tasks (not the bAbI data: label results "bAbI-style").

It writes files in the bAbI format (read back by :mod:`data_prep.qa_babi`), so the
same pipeline serves real bAbI folders and generated ones, offline.

Tasks (numbers follow bAbI):

* 1 single supporting fact   ``Mary moved to the kitchen.``  ``Where is Mary?``
* 2 two supporting facts     people move and pick up / drop objects; ``Where is the apple?``
* 3 three supporting facts   ``Where was the apple before the kitchen?`` (the object's previous place)
* 5 three argument relations ``Fred gave the milk to Bill.`` ``Who gave the milk to Bill?`` ...
* ``b`` the artificial task of the paper's appendix B: N=10 assignments ``x_j is v_j`` with
  x_j from V1 and v_j from V2 (|V1| = |V2| = k), variables may repeat; ``What is x?`` is
  answered by the last value assigned to x.  10K train and 1K test, no test story in train.

``num_names`` (10 .. 10,000) sets how many distinct person names the stories draw
from (paper Fig. 1).  ``zero_shot``, any of {rooms, objects, people}, adds a test split
``test_{kind}`` per kind that uses only rooms / objects / names that never occur in train or
valid (Fig. 5 / Table 2); ``all`` (ours, beyond the paper) makes all three unseen at once.
Train and the original test are the same with or without it.
Everything is drawn from ``random.Random(seed-derived)``: the same arguments give
byte-identical files.
"""
from __future__ import annotations

import hashlib
import random
from typing import Dict, List, Optional, Sequence, Tuple

from nesyseq.common.errors import UserError

TASKS = ("1", "2", "3", "5", "b")
ZERO_SHOT = ("rooms", "objects", "people", "all")   # all: the three kinds unseen at once (ours)

# Training pools first, zero-shot pools second (disjoint).
ROOMS = ["bathroom", "hallway", "kitchen", "garden", "office", "bedroom",
         "cellar", "attic", "library", "garage", "balcony", "pantry"]
OBJECTS = ["apple", "football", "milk", "ball", "book", "key",
           "cup", "hat", "pen", "box", "lamp", "shoe"]
_TRAIN_POOL = 6
WORDINGS = ("ours", "babi")
MOVE_VERBS = ["moved to", "went to", "travelled to", "journeyed to", "went back to"]
GRAB_VERBS = ["picked up", "got", "grabbed", "took"]
DROP_VERBS = ["dropped", "put down", "discarded", "left"]

_ONSETS = ["b", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "br", "ch", "dr", "gr", "kl", "sh", "st", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ei", "ou"]
_CODAS = ["", "n", "r", "l", "s", "m", "th", "x"]


def make_names(count: int, seed: int = 0) -> List[str]:
    """``count`` distinct two-or-three-syllable names (lower case), deterministic in ``seed``."""
    if not 1 <= count <= 100_000:
        raise UserError(f"--num-names must be in 1..100000, got {count}")
    rng = random.Random(_derive(seed, "names"))
    names: List[str] = []
    seen = set(ROOMS) | set(OBJECTS)
    while len(names) < count:
        n_syl = 2 if rng.random() < 0.7 else 3
        name = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(n_syl)) + rng.choice(_CODAS)
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def _derive(seed: int, *parts) -> int:
    h = hashlib.sha256(("|".join([str(seed)] + [str(p) for p in parts])).encode()).digest()
    return int.from_bytes(h[:8], "little")


def _cap(word: str) -> str:
    return word[:1].upper() + word[1:]


class _Story:
    """Collects bAbI lines with ids; questions reference statement ids."""

    def __init__(self):
        self.lines: List[str] = []

    def say(self, text: str) -> int:
        self.lines.append(f"{len(self.lines) + 1} {text}")
        return len(self.lines)

    def ask(self, question: str, answer: str, support: Sequence[int]) -> None:
        self.lines.append(f"{len(self.lines) + 1} {question}\t{answer}\t{' '.join(map(str, support))}")


def _task1(rng, people, rooms, n_questions=5) -> _Story:
    st, where = _Story(), {}
    for _ in range(n_questions):
        for _ in range(2):
            p, r = rng.choice(people), rng.choice(rooms)
            where[p] = (r, st.say(f"{_cap(p)} {rng.choice(MOVE_VERBS)} the {r}."))
        p = rng.choice(sorted(where))
        st.ask(f"Where is {_cap(p)}?", where[p][0], [where[p][1]])
    return st


def _task2_3(rng, people, rooms, objects, task: str, n_questions=5, wording: str = "ours") -> Optional[_Story]:
    """Shared world for tasks 2 and 3: people move, pick up and drop objects.  ``wording="babi"``
    says it as the released files do: every taking ends in "there" ("Mary got the milk there."),
    and a leaving does one time in five (the released task-2 train file: 8,691 of 8,691 and
    1,365 of 6,693)."""
    babi = wording == "babi"
    st = _Story()
    at: Dict[str, Tuple[str, int]] = {}          # person -> (room, statement id)
    holder: Dict[str, Tuple[str, int]] = {}      # object -> (person, id of the grab)
    lying: Dict[str, Tuple[str, int]] = {}       # object -> (room, id of the drop)
    history: Dict[str, List[Tuple[str, List[int]]]] = {}  # object -> places it has been, with support
    asked, guard = 0, 0
    while asked < n_questions and guard < 40 * n_questions:
        guard += 1
        p = rng.choice(people)
        act = rng.random()
        mine = [o for o, (h, _) in holder.items() if h == p]
        if p in at and act < 0.3:
            free = [o for o in objects if o not in holder and (o not in lying or lying[o][0] == at[p][0])]
            if free:
                o = rng.choice(free)
                sid = st.say(f"{_cap(p)} {rng.choice(GRAB_VERBS)} the {o}{' there' if babi else ''}.")
                holder[o] = (p, sid)
                lying.pop(o, None)
                _record(history, o, at[p][0], [sid, at[p][1]])
                continue
        if mine and act < 0.45:
            o = rng.choice(mine)
            there = babi and rng.random() < 0.2
            sid = st.say(f"{_cap(p)} {rng.choice(DROP_VERBS)} the {o}{' there' if there else ''}.")
            del holder[o]
            lying[o] = (at[p][0], sid)
            continue
        r = rng.choice([x for x in rooms if p not in at or x != at[p][0]])
        sid = st.say(f"{_cap(p)} {rng.choice(MOVE_VERBS)} the {r}.")
        at[p] = (r, sid)
        for o in mine:
            _record(history, o, r, [holder[o][1], sid])
        if rng.random() < 0.5:
            if task == "2":
                held = [o for o in holder]
                if held:
                    o = rng.choice(held)
                    h, gid = holder[o]
                    st.ask(f"Where is the {o}?", at[h][0], sorted({gid, at[h][1]}))
                    asked += 1
            else:
                ready = [o for o, hist in history.items() if len(hist) >= 2]
                if ready:
                    o = rng.choice(ready)
                    (prev, sup_prev), (cur, sup_cur) = history[o][-2], history[o][-1]
                    st.ask(f"Where was the {o} before the {cur}?", prev, sorted(set(sup_prev + sup_cur)))
                    asked += 1
    return st if asked == n_questions else None


def _record(history, obj, room, support) -> None:
    hist = history.setdefault(obj, [])
    if hist and hist[-1][0] == room:
        return
    hist.append((room, sorted(set(support))))


def _task5(rng, people, rooms, objects, n_questions=5) -> _Story:
    st, gives = _Story(), []
    for _ in range(n_questions):
        for _ in range(2):
            if rng.random() < 0.25:
                st.say(f"{_cap(rng.choice(people))} {rng.choice(MOVE_VERBS)} the {rng.choice(rooms)}.")
            a, b = rng.sample(people, 2)
            o = rng.choice(objects)
            gives.append((a, o, b, st.say(f"{_cap(a)} gave the {o} to {_cap(b)}.")))
        a, o, b, sid = gives[-1] if rng.random() < 0.5 else rng.choice(gives[-2:])
        # only ask what the most recent matching statement determines
        kind = rng.randrange(4)
        if kind == 0:
            q, ans = f"Who gave the {o} to {_cap(b)}?", a
            match = [g for g in gives if g[1] == o and g[2] == b]
        elif kind == 1:
            q, ans = f"Who received the {o}?", b
            match = [g for g in gives if g[1] == o]
        elif kind == 2:
            q, ans = f"What did {_cap(a)} give to {_cap(b)}?", o
            match = [g for g in gives if g[0] == a and g[2] == b]
        else:
            q, ans = f"Who did {_cap(a)} give the {o} to?", b
            match = [g for g in gives if g[0] == a and g[1] == o]
        last = match[-1]
        ans = {0: last[0], 1: last[2], 2: last[1], 3: last[2]}[kind]
        st.ask(q, ans, [last[3]])
    return st


def _task_b(rng, variables, values, n_assign=10) -> _Story:
    st, last = _Story(), {}
    for _ in range(n_assign):
        x, v = rng.choice(variables), rng.choice(values)
        last[x] = (v, st.say(f"{_cap(x)} is {v}."))
    x = rng.choice(sorted(last))
    st.ask(f"What is {_cap(x)}?", last[x][0], [last[x][1]])
    return st


def generate_split(task: str, n_stories: int, rng: random.Random, people, rooms, objects,
                   exclude: Optional[set] = None, people_per_story: Optional[int] = None,
                   questions_per_story: int = 5, wording: str = "ours") -> List[str]:
    """Lines of ``n_stories`` stories; stories whose text is in ``exclude`` are redrawn.  A story
    draws ``people_per_story`` of ``people`` (default 4, task 5: 3, as bAbI's) and asks
    ``questions_per_story`` questions (5, as bAbI's); a story lasts until its last question.
    ``wording``: "ours", or "babi", the released files' "there" (tasks 2 and 3, ``_task2_3``)."""
    out, guard = [], 0
    while len(out) < n_stories:
        guard += 1
        if guard > 50 * n_stories + 1000:
            raise UserError(f"task {task}: could not draw {n_stories} distinct stories (pools too small)")
        n_per = 4 if people_per_story is None else people_per_story
        per = rng.sample(people, min(n_per, len(people))) if task != "b" else people
        if task == "1":
            st = _task1(rng, per, rooms, questions_per_story)
        elif task in ("2", "3"):
            st = _task2_3(rng, per, rooms, objects, task, questions_per_story, wording)
        elif task == "5":
            n5 = 3 if people_per_story is None else people_per_story
            st = _task5(rng, rng.sample(people, min(n5, len(people))), rooms, objects, questions_per_story)
        else:
            st = _task_b(rng, people, rooms)
        if st is None:
            continue
        text = "\n".join(st.lines)
        if exclude is not None:
            if text in exclude:
                continue
            exclude.add(text)
        out.append(text)
    return out


def generate_task(task: str, n_train: int = 1000, n_test: int = 1000, num_names: int = 4,
                  zero_shot=None, k: int = 10, seed: int = 0, people_per_story: Optional[int] = None,
                  questions_per_story: int = 5, wording: str = "ours") -> Dict[str, str]:
    """Return {"train": text, "test": text, ["test_rooms": text, ...]} in the bAbI format.

    Stories carry 5 questions (tasks 1-5) or 1 (task b); ``n_train`` / ``n_test`` count
    stories (task b: 10K / 1K in the paper).  Test stories never repeat a train story.
    ``zero_shot`` (one of rooms / objects / people, or several) adds a test split per kind,
    ``test_{kind}``, whose rooms / objects / people are all unseen in training, as the paper's
    Table 2: the model is trained once and tested on the original and every zero-shot split.
    ``train`` and ``test`` do not depend on ``zero_shot``.  ``people_per_story`` and
    ``questions_per_story`` shape every split (``generate_split``), e.g. stories twice as crowded
    and twice as long as bAbI's.
    """
    task = str(task).lower()
    if task not in TASKS:
        raise UserError(f"--tasks: unknown task {task!r} (choose from {', '.join(TASKS)})")
    kinds = [] if zero_shot is None else ([zero_shot] if isinstance(zero_shot, str) else list(zero_shot))
    for kind in kinds:
        if kind not in ZERO_SHOT:
            raise UserError(f"--zero-shot must be among {', '.join(ZERO_SHOT)}, got {kind!r}")
    rng = random.Random(_derive(seed, "task", task, num_names, None, k))
    if task == "b":
        if kinds:
            raise UserError("--zero-shot applies to tasks 1-5, not the appendix-B task b")
        if k < 2:
            raise UserError(f"--k must be >= 2, got {k}")
        variables = [f"x{i}" for i in range(k)]
        values = [f"v{i}" for i in range(k)]
        seen: set = set()
        train = generate_split("b", n_train, rng, variables, values, [], exclude=seen)
        test = generate_split("b", n_test, rng, variables, values, [], exclude=seen)
        return {"train": "\n".join(train) + "\n", "test": "\n".join(test) + "\n"}
    if num_names < 4 and task != "1":
        raise UserError(f"task {task} needs --num-names >= 4")
    if people_per_story is not None and not 1 <= people_per_story <= num_names:
        raise UserError(f"--people-per-story must be in 1..--num-names ({num_names}), got {people_per_story}")
    if questions_per_story < 1:
        raise UserError(f"--questions-per-story must be >= 1, got {questions_per_story}")
    if wording not in WORDINGS:
        raise UserError(f"--wording must be one of {', '.join(WORDINGS)}, got {wording!r}")
    shape = dict(people_per_story=people_per_story, questions_per_story=questions_per_story, wording=wording)
    new_people = "people" in kinds or "all" in kinds
    names = make_names(2 * num_names if new_people else num_names, seed)   # a prefix is make_names(n)
    pools = {"people": names[:num_names], "rooms": ROOMS[:_TRAIN_POOL], "objects": OBJECTS[:_TRAIN_POOL]}
    unseen = {"people": names[num_names:], "rooms": ROOMS[_TRAIN_POOL:], "objects": OBJECTS[_TRAIN_POOL:]}
    seen = set()
    train = generate_split(task, n_train, rng, pools["people"], pools["rooms"], pools["objects"], exclude=seen, **shape)
    train_set = set(seen)
    test = generate_split(task, n_test, rng, pools["people"], pools["rooms"], pools["objects"], exclude=seen, **shape)
    out = {"train": "\n".join(train) + "\n", "test": "\n".join(test) + "\n"}
    for kind in kinds:
        p = dict(unseen) if kind == "all" else dict(pools, **{kind: unseen[kind]})
        zrng = random.Random(_derive(seed, "zero-shot", task, num_names, kind, k))
        z = generate_split(task, n_test, zrng, p["people"], p["rooms"], p["objects"], exclude=set(train_set), **shape)
        out[f"test_{kind}"] = "\n".join(z) + "\n"
    return out
