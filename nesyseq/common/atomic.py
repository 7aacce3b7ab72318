"""Files written whole or not at all.

Every file nesyseq writes (binarized data, reports, converted checkpoints) goes through
``atomic_write``: the content is written to a temporary file in the destination's folder,
flushed to disk, and renamed over the destination.  A crash, a full disk or an exception
while writing leaves the old file (if any) untouched and no temporary behind.
"""
import os
import uuid
from pathlib import Path
from typing import Callable, Union

PathLike = Union[str, "os.PathLike[str]"]


def atomic_write(path: PathLike, write: Callable[[str], None]) -> None:
    """Create ``path`` via ``write(tmp)``: ``write`` fills the file named ``tmp`` (e.g.
    ``torch.save(obj, tmp)``), which is fsynced and then ``os.replace``-d onto ``path``."""
    path = Path(path)
    # unique per call: two writers of one path (a signal handler, a rank with the same pid on
    # another node of a shared file system) never share a temporary; ``*.tmp-*`` sweeps match it
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        write(str(tmp))
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:  # pragma: no cover - e.g. filesystems without directory fsync
        pass


def atomic_write_bytes(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see ``atomic_write``)."""
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def atomic_write_text(path: PathLike, text: str) -> None:
    """Write ``text`` as UTF-8 with ``\\n`` line ends to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))
