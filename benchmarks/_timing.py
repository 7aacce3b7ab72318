"""The one timer of the benchmarks: wall (and process CPU) seconds, the device synchronised.

    with Stopwatch(device) as sw:        sw.wall, sw.cpu: seconds of the block; on CUDA the
        step()                           queued work is waited for at both ends
    repeat(fn, device, warmup, rep)      seconds of each of ``rep`` calls after ``warmup``
                                         untimed ones (CUDA events on the GPU)
    middle(times)                        the upper median, sorted(times)[n // 2]

Each benchmark keeps its own reduction (min, median, a loop of n steps) and prints its ratio
against a baseline run in the same process.
"""
import time
from typing import Callable, List, Sequence

import torch


def _is_cuda(device) -> bool:
    return device is not None and torch.device(device).type == "cuda"


def sync(device) -> None:
    """Wait for the work queued on ``device`` (CUDA); nothing elsewhere."""
    if _is_cuda(device):
        torch.cuda.synchronize()


class Stopwatch:
    def __init__(self, device=None):
        self.device = device
        self.wall = self.cpu = None

    def __enter__(self):
        sync(self.device)
        self._t0, self._c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        sync(self.device)
        self.wall = time.perf_counter() - self._t0
        self.cpu = time.process_time() - self._c0
        return False


def repeat(fn: Callable[[], object], device=None, warmup: int = 0, rep: int = 1) -> List[float]:
    """Seconds of each of ``rep`` calls of ``fn``, after ``warmup`` calls that are not timed."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(rep):
        if _is_cuda(device):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            with Stopwatch() as sw:
                fn()
            times.append(sw.wall)
    return times


def middle(times: Sequence[float]) -> float:
    """The upper median (the element at n // 2 of the sorted times)."""
    return sorted(times)[len(times) // 2]
