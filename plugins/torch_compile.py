"""Opt-in ``torch.compile`` for the layer stacks (``--compile`` / ``model.compile=true``).

What is compiled: every encoder/decoder layer (``TPEncoderLayer``, ``TPDecoderLayer``,
``FolnetLayer``), each with ``nn.Module.compile``.  Layers of one stack share their Python
code, so dynamo traces it once and reuses the graph for every layer (their parameters are
graph inputs), which keeps the first step short.  ``nn.Module.compile`` compiles the
module's call in place, so ``state_dict()`` keys stay as they are (no ``_orig_mod.``
prefix): checkpoints of compiled and eager models are interchangeable.

What stays eager: the glue between layers (embedding, masks, the one ``padding.any()``
host sync per batch, the output projection) and every incremental decoding step
(``call_eager``): a step changes the cache length each time and mutates fairseq's
incremental-state dict, which would recompile per step for no gain.

Shapes: layers compile with ``dynamic=True``, so fairseq's variable batch sizes and lengths
reuse one graph instead of recompiling per shape.  ``--compile-static`` turns that off (one
graph per shape: only sensible with fixed-size batches).  The flag is spelled as the non-default
because fairseq's CLI maps a bool field to ``store_true``/``store_false`` by its default.
"""

from dataclasses import dataclass, field
from typing import Iterable, Optional

import torch
import torch.nn as nn
from fairseq.dataclass import ChoiceEnum, FairseqDataclass

COMPILE_MODE_CHOICES = ChoiceEnum(["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])


@dataclass
class CompileConfig(FairseqDataclass):
    compile: bool = field(default=False, metadata={
        "help": "torch.compile every encoder/decoder layer (plugins/torch_compile.py); incremental "
                "decoding steps stay eager; checkpoints are unchanged"})
    compile_mode: COMPILE_MODE_CHOICES = field(default="default", metadata={"help": "torch.compile mode"})
    compile_static: bool = field(default=False, metadata={
        "help": "compile with static shapes (recompiles for every new batch shape; default: dynamic)"})
    compile_backend: str = field(default="inductor", metadata={
        "help": "torch.compile backend (inductor; aot_eager / eager for debugging)"})


def is_compiled(module: nn.Module) -> bool:
    return getattr(module, "_compiled_call_impl", None) is not None


def compile_modules(modules: Iterable[nn.Module], backend="inductor", mode: Optional[str] = "default",
                    dynamic: Optional[bool] = True) -> int:
    """Compile each module in place (``nn.Module.compile``); returns how many."""
    n = 0
    kwargs = dict(backend=backend, dynamic=dynamic)
    if mode and mode != "default":
        kwargs["mode"] = mode
    for m in modules:
        m.compile(**kwargs)
        n += 1
    return n


def compile_units(model: nn.Module):
    """The modules ``--compile`` compiles: those whose class sets ``compile_unit = True``
    (TPEncoderLayer, TPDecoderLayer, FolnetLayer).  A class attribute rather than an import
    list, so this module imports no model (plugins' import graph has no cycle)."""
    return [m for m in model.modules() if getattr(type(m), "compile_unit", False)]


def maybe_compile(model: nn.Module, cfg) -> nn.Module:
    """Apply ``--compile`` to a freshly built model; a no-op without it."""
    if not cfg.compile:
        return model
    layers = compile_units(model)
    if not layers:
        raise ValueError(f"--compile: {type(model).__name__} has no compilable layers")
    compile_modules(layers, backend=cfg.compile_backend, mode=str(cfg.compile_mode), dynamic=not cfg.compile_static)
    return model


def call_eager(module: nn.Module, *args, **kwargs):
    """Call a module without its compiled wrapper (hooks still run)."""
    return module._call_impl(*args, **kwargs) if is_compiled(module) else module(*args, **kwargs)

