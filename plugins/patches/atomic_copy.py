"""Checkpoint copies are not atomic.

``save_checkpoint`` writes the first of its files (checkpoint_best.pt when the run found a new
best) atomically, temp file then rename (fairseq/checkpoint_utils.py:578-587), and copies it to the
others, checkpoint_last.pt among them, with ``PathManager.copy``, a plain ``shutil.copyfile`` onto
the target (checkpoint_utils.py:139, file_io.py:71-76).  A job killed during that copy leaves a
truncated checkpoint_last.pt, and every resume then fails on it.  We copy local files to a temp
name and rename, so the old checkpoint_last.pt stays whole until the new one is; a copy that fails
(a full disk) removes its temporary and ends the run in one line naming the file.
"""
from nesyseq.plugins.patches._version import check, mark_fixed
from nesyseq.plugins.patches.checkpoint_files import save_failed_message

FAIRSEQ_VERSIONS = ("0.12.3",)


def apply() -> None:
    check(__name__, FAIRSEQ_VERSIONS)
    _install()


def _install() -> None:
    import os
    import shutil

    from fairseq.file_io import PathManager

    original = PathManager.copy
    if getattr(original, "_nesyseq_fixed", False):
        return

    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if "://" in str(src_path) or "://" in str(dst_path):
            return original(src_path, dst_path, overwrite)
        # like the original without iopath (shutil.copyfile), an existing target is replaced
        tmp = f"{dst_path}.tmp-copy"
        try:
            shutil.copyfile(src_path, tmp)
            os.replace(tmp, dst_path)
        except OSError as exc:   # a full disk: one line (plugins/patches/checkpoint_files.py), the old copy kept
            raise SystemExit(save_failed_message(str(dst_path), exc)) from None
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return True

    mark_fixed(copy)
    PathManager.copy = staticmethod(copy)


