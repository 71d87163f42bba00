"""The one check that a torch device exists on this machine, for every command and the trainer."""

from __future__ import annotations

from lengthwise.core.errors import SettingError

__all__ = ["check_device"]


def check_device(device: str | None) -> str | None:
    """`device` when torch can use it here (None = the best available, decided by the caller); else a
    `SettingError` on ``device`` saying what to use instead. torch is imported only when a device is given."""
    if device is None:
        return None
    import torch

    try:
        target = torch.device(device)
    except (RuntimeError, ValueError):
        raise SettingError("device", device, "not a torch device; use cpu, cuda, cuda:N or mps") from None
    available = {
        "cpu": True,
        "cuda": torch.cuda.is_available() and (target.index or 0) < torch.cuda.device_count(),
        "mps": torch.backends.mps.is_available(),
    }.get(target.type, False)
    if not available:
        raise SettingError("device", device, "not available on this machine; use cpu, or leave it unset")
    return device
