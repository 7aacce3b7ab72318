"""Matplotlib set-up and atomic PNG writing shared by the evaluation reports."""
import io
import logging
from pathlib import Path

from nesyseq.common.atomic import atomic_write_bytes


def pyplot():
    """matplotlib.pyplot on the headless Agg backend, without font-search debug lines."""
    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_png(fig, path: Path, dpi: int) -> None:
    """Render ``fig`` and write it to ``path`` atomically; closes the figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot().close(fig)
    atomic_write_bytes(str(path), buf.getvalue())
