"""An experiment: a chain of stages (prepare -> train -> evaluate) read from
``configs/experiments/NAME.yaml`` and resolved into one argv per job.

The yaml (see configs/experiments/math.yaml) holds free parameters plus::

    stages:
      - name: train
        argv: [fairseq-train, "${run_dir}/prepare/data/bin", --seed, "${seed}", ...]
        outputs: ["${job_dir}/checkpoints/checkpoint_last.pt"]   # all exist + DONE marker => skipped
        array: true          # one job per --array value (default true; prepare sets false)
        checkpointable: true # requeued on USR2, resumes from checkpoint_last.pt
        arms: t2_relative_table  # optional: one job per whitespace-separated value of this key

Interpolations available besides the yaml's own keys: ``run_dir`` (absolute),
``job_dir`` (this job's absolute folder), ``array_suffix`` (``/seed=2`` or ``""``),
``arm_suffix`` (``/t2_relative_table=zero`` in an armed stage, else ``""``),
``user_dir`` and ``repo`` (this checkout).

``arms: KEY`` runs a stage once per value listed in KEY (``t2_relative_table: keep zero``;
values are separated by whitespace or commas), for each ``--array`` member, all in the stage's
one job array: the member's folder gets a subfolder ``KEY=VALUE`` and KEY reads as that one value
inside the job.  ``arms: [KEY1, KEY2]`` runs it once per combination (KEY1's values outermost),
in ``KEY1=V1/KEY2=V2``.  An armed stage reads an armed stage before it through
``${array_suffix}${arm_suffix}``; a later stage without arms sees KEY's whole list (``nesyseq
choose-arm --arms ${KEY}`` reads every arm).

Commands are argv lists, never shell strings: every value reaches the program as one argument,
whatever it contains.  A list inside an argv (an interpolated list key, e.g. ``"${recipes.${recipe}}"``
in qa_table2.yaml) is spliced into it, one argument per item; an empty string drops out.

An optional ``choices: {KEY: [v1, v2, ...]}`` lists the values a key may take (each
whitespace- or comma-separated word of it): a value outside them is refused before any job is
built, with the key named.

Resolvers besides OmegaConf's own (values computed by project code, recorded resolved in each
job's config.yaml): ``${babi_entities:words}`` and ``${babi_entities:groups}``, bAbI's people,
rooms and objects as ``--entity-dropout-words`` / ``--entity-dropout-groups`` read them
(data_prep/qa_zero_shot.py ``entity_words`` / ``entity_groups``); ``${abspath:PATH}``, PATH
made absolute against the launching folder (a stage runs in its own job folder);
``${ceil_div:A,B}``, the integer ceil(A / B) (qa_table1.yaml: the lr halves at a third and two
thirds of max_update, whatever max_update is).
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, cast

from nesyseq.common.errors import UserError
from nesyseq.common.fairseq_cli import USER_DIR, fairseq_bin

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "configs" / "experiments"
META_KEYS = ("run_dir", "job_dir", "array_suffix", "arm_suffix", "user_dir", "repo")


@dataclass
class Job:
    stage: str
    folder: Path
    argv: List[str]
    outputs: List[Path]
    checkpointable: bool
    config: dict
    array_value: Optional[Dict[str, str]] = None

    @property
    def command_line(self) -> str:
        return shlex.join(self.argv)


@dataclass
class Plan:
    name: str
    run_dir: Path
    stages: List[List[Job]] = field(default_factory=list)  # stage -> its jobs (array members)


def _babi_entities(what: str) -> str:
    from nesyseq.data_prep.qa_zero_shot import entity_groups, entity_words

    table = {"words": entity_words, "groups": entity_groups}
    if what not in table:
        raise UserError(f"${{babi_entities:{what}}}: expected words or groups")
    return table[what]()


def _abspath(path) -> str:
    if path is None or str(path) == "":
        raise UserError("${abspath:...}: an empty path")
    return os.path.abspath(os.path.expanduser(str(path)))


def _ceil_div(a, b) -> int:
    try:
        a, b = int(a), int(b)
    except (TypeError, ValueError):
        raise UserError(f"${{ceil_div:{a},{b}}}: expected two integers") from None
    if b <= 0:
        raise UserError(f"${{ceil_div:{a},{b}}}: the divisor must be positive")
    return -(-a // b)


RESOLVERS = {"babi_entities": _babi_entities, "abspath": _abspath, "ceil_div": _ceil_div}


def split_words(text: str) -> List[str]:
    """The values of a list key (arms, choices): separated by whitespace or commas."""
    return [w for w in re.split(r"[\s,]+", text) if w]


def register_resolvers() -> None:
    from omegaconf import OmegaConf

    for name, fn in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)


def experiment_names() -> List[str]:
    """The yamls of configs/experiments/ that `nesyseq launch` runs (a ``stages:`` list); the
    others there are Hydra configs for fairseq-hydra-train (wmt_en_de.yaml)."""
    return sorted(p.stem for p in EXPERIMENTS.glob("*.yaml")
                  if any(line.startswith("stages:") for line in p.read_text(encoding="utf-8").splitlines()))


def load_experiment(name: str):
    from omegaconf import OmegaConf

    register_resolvers()
    path = Path(name)
    if not path.suffix:
        path = EXPERIMENTS / f"{name}.yaml"
    if not path.is_file():
        raise UserError(f"experiment {name!r}: no file {path} (known: {', '.join(experiment_names())})")
    try:
        return OmegaConf.load(path), path
    except Exception as exc:  # yaml syntax error: name the file
        raise UserError(f"{path}: {exc}".splitlines()[0]) from None


def parse_array(spec: Optional[str]) -> List[Dict[str, str]]:
    """``seed=1,2,3`` -> [{'seed': '1'}, {'seed': '2'}, {'seed': '3'}].  Each member gets a folder
    (and a save dir) named by its value, so an empty value and two values with one folder (``1,1``,
    or ``a/b,a_b``: ``/`` becomes ``_`` in the folder name) are refused: two jobs would write
    one folder."""
    if not spec:
        return [None]
    key, sep, values = spec.partition("=")
    if not sep or not key or not values:
        raise UserError(f"--array {spec!r}: expected KEY=v1,v2,... (e.g. seed=1,2,3)")
    vals = values.split(",")
    for i, v in enumerate(vals, 1):
        if v.strip() == "":
            raise UserError(f"--array {spec!r}: value {i} is empty (expected KEY=v1,v2,..., e.g. seed=1,2,3)")
    folders = {}
    for v in vals:
        folder = _array_suffix({key: v})
        if folder in folders:
            same = "twice" if folders[folder] == v else f"and {folders[folder]!r} both"
            raise UserError(f"--array {spec!r}: {v!r} is given {same}, so two jobs would share the folder "
                            f"and save dir {folder.lstrip('/')}; give each value once")
        folders[folder] = v
    return [{key: v} for v in vals]


def _array_suffix(value) -> str:
    if not value:
        return ""
    return "/" + ",".join(f"{k}={v}" for k, v in value.items()).replace("/", "_")


def _resolve_argv(argv: List[str]) -> List[str]:
    """The first word ``nesyseq`` / ``fairseq-*`` runs from this environment."""
    if not argv:
        return argv
    head = argv[0]
    if head == "nesyseq" or head.startswith("fairseq-"):
        head = fairseq_bin(head)
    return [head] + list(argv[1:])


def build_plan(name: str, overrides: List[str], run_dir: Path, array: Optional[str],
               derived: Optional[Callable[[Path], Dict[str, object]]] = None) -> Plan:
    """``derived(job_folder)`` gives values the launcher computes from its own flags (the
    distributed keys, slurm/launcher.py): they replace the yaml's defaults, only for keys the
    yaml has, and the user's KEY=VALUE overrides win over them."""
    from omegaconf import OmegaConf

    base, path = load_experiment(name)
    try:
        over = OmegaConf.from_dotlist(list(overrides))
    except Exception as exc:
        raise UserError(f"override {overrides}: {exc}".splitlines()[0]) from None
    for key in over.keys():
        if key not in list(base.keys()) or key in ("stages", "choices"):
            raise UserError(f"override {key}=...: {path} has no key {key!r}")
    if "stages" not in base:
        raise UserError(f"{path}: no 'stages' list")
    run_dir = Path(run_dir).resolve()
    plan = Plan(name=str(base.get("name", Path(name).stem)), run_dir=run_dir)
    values = parse_array(array)
    for key in (values[0] or {}):
        if key not in list(base.keys()):
            raise UserError(f"--array {key}=...: {path} has no key {key!r}")
    for value in values:
        member = OmegaConf.from_dotlist([f"{k}={v}" for k, v in (value or {}).items()])
        _check_choices(path, base, OmegaConf.merge(base, over, member))
    for stage_cfg in base.stages:
        sname = stage_cfg.get("name")
        if not sname:
            raise UserError(f"{path}: a stage without a name")
        per_array = bool(stage_cfg.get("array", True))
        arm_keys = _arm_keys(path, sname, stage_cfg.get("arms"), base)
        jobs = []
        for value in (values if per_array else [None]):
            member = OmegaConf.from_dotlist([f"{k}={v}" for k, v in (value or {}).items()])
            cfg = OmegaConf.merge(base, over, member)
            combos = [[]]
            for key in arm_keys:      # the first key outermost
                combos = [c + [(key, v)] for c in combos for v in _arm_values(path, sname, key, cfg)]
            for arm in combos:
                jobs.append(_job(base, path, sname, over, member, value, dict(arm), run_dir, derived))
        plan.stages.append(jobs)
    return plan


def _check_choices(path: Path, base, cfg) -> None:
    """The yaml's optional ``choices: {KEY: [v1, v2, ...]}``: every whitespace-separated word of
    KEY must be one of them; checked before any job is built, naming the key and the value."""
    from omegaconf.errors import OmegaConfBaseException

    choices = base.get("choices") or {}
    for key in choices:
        if key not in base:
            raise UserError(f"{path}: choices: {key!r} is not a key of the experiment")
        allowed = [str(c) for c in choices[key]]
        try:
            raw = "" if cfg[key] is None else str(cfg[key])
        except OmegaConfBaseException as exc:
            raise UserError(f"{path}: {key}: {exc}".splitlines()[0]) from None
        for word in split_words(raw):
            if word not in allowed:
                raise UserError(f"{key}={raw}: {word!r} is not one of {', '.join(allowed)}")


def _arm_keys(path: Path, sname: str, spec, base) -> List[str]:
    """A stage's ``arms:``, one key or a list of keys, each a key of the experiment, none twice."""
    from omegaconf import ListConfig

    if spec is None:
        return []
    keys = list(spec) if isinstance(spec, (list, tuple, ListConfig)) else [spec]
    for key in keys:
        if not isinstance(key, str) or key not in list(base.keys()):
            raise UserError(f"{path}: stage {sname}: arms: {key!r} is not a key of the experiment")
    if not keys or len(set(keys)) != len(keys):
        raise UserError(f"{path}: stage {sname}: arms: {keys} (give one key or more, each once)")
    return keys


def _arm_values(path: Path, sname: str, key: str, cfg) -> List[str]:
    """The values an armed stage runs over: ``cfg[key]`` split on whitespace or commas, at least
    one, none twice."""
    from omegaconf.errors import OmegaConfBaseException

    try:
        raw = "" if cfg[key] is None else str(cfg[key])
    except OmegaConfBaseException as exc:
        raise UserError(f"{path}: stage {sname}: arms: {exc}".splitlines()[0]) from None
    arms = split_words(raw)
    if not arms:
        raise UserError(f"{path}: stage {sname}: arms over {key}, but {key} is empty (give one value or more)")
    repeated = sorted({a for a in arms if arms.count(a) > 1})
    if repeated:
        raise UserError(f"{path}: stage {sname}: {key}={raw!r} names {', '.join(repeated)} twice")
    return arms


def _job(base, path, sname, over, member, array_value, arm, run_dir, derived) -> Job:
    """One job of stage ``sname`` in ``RUN_DIR/STAGE[/KEY=VALUE][/ARMKEY=ARM...]``: the yaml merged
    with the launcher's values, the overrides, the array member and the arm (``{ARMKEY: ARM}``,
    one entry per armed key; in that order: later wins), then resolved."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    arm_suffix = "".join(_array_suffix({k: v}) for k, v in arm.items())
    suffix = _array_suffix(array_value) + arm_suffix
    folder = run_dir / sname / suffix.lstrip("/") if suffix else run_dir / sname
    launcher_values = {k: v for k, v in (derived(folder) if derived else {}).items() if k in base}
    cfg = OmegaConf.merge(base, OmegaConf.create(launcher_values), over, member, OmegaConf.create(arm))
    cfg.run_dir = str(run_dir)
    cfg.job_dir = str(folder)
    cfg.array_suffix = _array_suffix(array_value)
    cfg.arm_suffix = arm_suffix
    cfg.user_dir = str(USER_DIR)
    cfg.repo = str(REPO)
    idx = [s.name for s in base.stages].index(sname)
    try:
        stage = OmegaConf.to_container(cfg.stages[idx], resolve=True)
        # the other stages are not resolved here: one armed on a key this stage sees as a list
        # (``${models.${model}}``) only resolves inside its own jobs
        rest = OmegaConf.masked_copy(cfg, [str(k) for k in cfg.keys() if k != "stages"])  # type: ignore[arg-type]
        resolved = cast(Dict[str, Any], OmegaConf.to_container(rest, resolve=True))
    except OmegaConfBaseException as exc:
        raise UserError(_choice_error(cfg, over, member, exc) or _missing_entry(path, sname, cfg, exc)
                        or f"{path}: stage {sname}: {exc}".splitlines()[0]) from None
    resolved["stage"] = stage
    argv = [a for a in _splice(stage.get("argv") or []) if a != ""]  # "" drops an optional flag
    if not argv:
        raise UserError(f"{path}: stage {sname} has no argv")
    return Job(stage=sname, folder=folder, argv=_resolve_argv(argv),
               outputs=[Path(p) for p in stage.get("outputs") or []],
               checkpointable=bool(stage.get("checkpointable", False)), config=resolved,
               array_value=(dict(array_value or {}, **arm) if arm else array_value))


def _splice(argv) -> List[str]:
    out = []
    for a in argv:
        if isinstance(a, (list, tuple)):
            out += _splice(a)
        else:
            out.append("" if a is None else str(a))
    return out


def _choice_error(cfg, over, member, exc) -> Optional[str]:
    """``recipe=foo`` where the yaml reads ``${recipes.${recipe}}``: name the override and the
    values it may take, not only OmegaConf's missing interpolation key."""
    from omegaconf import DictConfig

    m = re.search(r"Interpolation key '(\w+)\.([^']+)' not found", str(exc))
    if not m or not isinstance(cfg.get(m.group(1)), DictConfig):
        return None
    for source in (member, over):
        for key in source.keys():
            if str(source[key]) == m.group(2):
                return (f"{key}={m.group(2)}: not one of {', '.join(map(str, cfg[m.group(1)].keys()))} "
                        f"(the keys of {m.group(1)})")
    return None


def _missing_entry(path, sname, cfg, exc) -> Optional[str]:
    """``${table.${a}.${b}}`` with no entry ``b`` under ``table.a``: name the table and the entries it
    has (qa_table1.yaml's ``recipes.table2`` has rows for the stpr models only)."""
    from omegaconf import DictConfig

    m = re.search(r"Interpolation key '([\w.]+)' not found", str(exc))
    if not m or "." not in m.group(1):
        return None
    node, walked = cfg, []
    for part in m.group(1).split("."):
        if not isinstance(node, DictConfig):
            return None
        if part not in node:
            where = ".".join(walked) or "the experiment"
            return (f"{path}: stage {sname}: {where} has no entry {part!r} "
                    f"(it has: {', '.join(map(str, node.keys()))})")
        node, walked = node[part], walked + [part]
    return None


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        commit = out.stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
