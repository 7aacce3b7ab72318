"""The device- and dtype-dependent facts the kernels' dispatch reads, as functions of the device type.

Callers pass ``tensor.device.type``, so the CPU suite drives every arm with a device-type
string (tests/test_device_policy.py); the lines that truly need a GPU are listed in
tools/gpu_only.py.
"""
from typing import Optional

import torch


def autocast_dtype(device_type: str) -> Optional[torch.dtype]:
    """autocast's dtype when autocast is on for this device type, else None."""
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None


def activation_dtype(device_type: str, dtype: torch.dtype) -> torch.dtype:
    """The dtype a matmul of a ``dtype`` tensor runs in: autocast's when it is on, else ``dtype``."""
    act = autocast_dtype(device_type)
    return dtype if act is None else act
