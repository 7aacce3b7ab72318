"""Write docs/flags.md: every option of every model nesyseq registers, read from the models'
FairseqDataclass configs, with its architectures (presets).

    python tools/model_flags_doc.py            rewrite docs/flags.md
    python tools/model_flags_doc.py --check    exit 1 if docs/flags.md is not what this writes

tests/test_docs_commands.py runs the check, so a new option or a changed default shows up as a
failing test until the page is regenerated."""
from __future__ import annotations

import argparse
import dataclasses
import enum
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "flags.md"

HEADER = """# Model flags

Every option of the models nesyseq registers, with its default and help, as `fairseq-train
--arch PRESET --help` prints it. Generated from the models' `FairseqDataclass` configs by
`python tools/model_flags_doc.py`; `tests/test_docs_commands.py` fails when this page is out of
date. A preset (`--arch`) sets some of these defaults; an option on the command line wins.
"""


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _fields(cls, prefix=""):
    """(flag, type, default, help) of a dataclass, nested option groups flattened as fairseq does."""
    for f in dataclasses.fields(cls):
        if f.name.startswith("_"):
            continue
        if dataclasses.is_dataclass(f.type) or (f.default_factory is not dataclasses.MISSING
                                                and dataclasses.is_dataclass(f.default_factory)):
            group = f.type if dataclasses.is_dataclass(f.type) else f.default_factory
            yield from _fields(group, prefix=f.name + ".")
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = ""
        kind = getattr(f.type, "__name__", str(f.type)).replace("typing.", "")
        if isinstance(f.type, type) and issubclass(f.type, enum.Enum):
            kind = " / ".join(str(e.value) for e in f.type)
        yield ("--" + f.name.replace("_", "-"), kind, default, f.metadata.get("help", ""), prefix)


def render() -> str:
    from fairseq import utils
    from fairseq.models import ARCH_MODEL_INV_REGISTRY, MODEL_DATACLASS_REGISTRY, MODEL_REGISTRY

    utils.import_user_module(argparse.Namespace(user_dir=str(ROOT / "user_dir")))
    ours = sorted(name for name, cls in MODEL_REGISTRY.items() if cls.__module__.startswith("nesyseq.plugins."))
    out = [HEADER]
    out.append("| model | presets (`--arch`) | defined in |")
    out.append("|---|---|---|")
    for name in ours:
        presets = ", ".join(f"`{a}`" for a in sorted(ARCH_MODEL_INV_REGISTRY.get(name, [])))
        out.append(f"| [`{name}`](#{name}) | {presets} | `{MODEL_REGISTRY[name].__module__.removeprefix('nesyseq.').replace('.', '/')}.py` |")
    for name in ours:
        config = MODEL_DATACLASS_REGISTRY[name]
        out.append(f"\n## {name}\n")
        out.append(f"Config `{config.__name__}`.\n")
        out.append("| flag | type | default | help |")
        out.append("|---|---|---|---|")
        for flag, kind, default, help_text, group in _fields(config):
            where = f" (group `{group[:-1]}`)" if group else ""
            shown = f"`{_cell(default)}`" if str(default) != "" else '`""`'
            out.append(f"| `{flag}` | {_cell(kind)} | {shown} | {_cell(help_text)}{where} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python tools/model_flags_doc.py", file=sys.stderr)
            return 1
        return 0
    sys.path.insert(0, str(ROOT))
    from nesyseq.common.atomic import atomic_write_text
    atomic_write_text(PAGE, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
