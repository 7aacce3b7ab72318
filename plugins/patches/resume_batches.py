"""A resumed run trains on other batches than the uninterrupted one.

``FairseqTask.get_batch_iterator`` composes the batches once, from ``ordered_indices()`` drawn
under ``numpy_seed(seed + epoch)`` (fairseq/tasks/fairseq_task.py:290), and caches the iterator
for all later epochs (:277, :338), which only reshuffle the order of those same batches.  An
uninterrupted run composes them at epoch 1; a run resumed from ``checkpoint_last.pt`` at epoch E
composes them at E, so from its next epoch on it sees other batches and drifts away.  For the
cached iterator we always compose at epoch 1 and hand the iterator (and the dataset) the real
epoch afterwards.  Iterators that fairseq rebuilds every epoch (no cache, ``rebuild_batches``)
are left alone: they already compose at their epoch.
"""
from typing import Any

from nesyseq.plugins.patches._version import swap

FAIRSEQ_VERSIONS = ("0.12.3",)
_original: Any = None  # the fairseq function this patch wraps, set by apply()


def get_batch_iterator_resumable(self, dataset, *args, epoch=1, disable_iterator_cache=False,
                                 update_epoch_batch_itr=False, **kwargs):
    cached_for_all_epochs = (not disable_iterator_cache and not update_epoch_batch_itr
                             and self.can_reuse_epoch_itr(dataset)
                             and not getattr(self.cfg, "rebuild_batches", False))
    if not cached_for_all_epochs or epoch == 1 or dataset in self.dataset_to_epoch_iter:
        return _original(self, dataset, *args, epoch=epoch, disable_iterator_cache=disable_iterator_cache,
                         update_epoch_batch_itr=update_epoch_batch_itr, **kwargs)
    itr = _original(self, dataset, *args, epoch=1, disable_iterator_cache=disable_iterator_cache,
                    update_epoch_batch_itr=update_epoch_batch_itr, **kwargs)
    itr.epoch = epoch  # the batches are composed (at epoch 1); now the iterator's real epoch
    dataset.set_epoch(epoch)
    return itr


def original():
    """fairseq's own get_batch_iterator (tests compare against it)."""
    from fairseq.tasks.fairseq_task import FairseqTask

    return _original or FairseqTask.get_batch_iterator


def apply() -> None:
    global _original
    from fairseq.tasks.fairseq_task import FairseqTask

    _original = swap(__name__, FAIRSEQ_VERSIONS, FairseqTask, "get_batch_iterator",
                     get_batch_iterator_resumable) or _original
