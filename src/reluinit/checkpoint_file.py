"""Reading a file this pipeline wrote with ``torch.save`` (a training checkpoint, LR's checkpoints,
a job's masks): its seal checked (``integrity.verify``), then ``torch.load(weights_only=True)``
only, so a crafted pickle never runs. A file that does not load so (damaged, truncated, another
kind of file, or one that asks to run code) is refused in one sentence that names it and its fix,
never with torch's own text, which advises loading it with the safety off."""

from __future__ import annotations

import pickle
import re
import shlex
import warnings
from pathlib import Path

import torch

from . import integrity


class NotACheckpoint(integrity.DamagedFile):
    """A file that ``torch.load(weights_only=True)`` refused: ``what`` says why, without torch's advice."""

    def __init__(self, path: str | Path, what: str):
        self.path, self.what = Path(path), what
        fix = f"`rm {shlex.quote(str(path))} && {integrity.rebuild_command(path, force=False)}`"
        super().__init__(f"{path} is not a checkpoint this pipeline wrote ({what}), so it was not loaded: delete it and "
                         f"rebuild it with {fix}")


def _why(error: Exception) -> str:
    """What a refused load means, in words of our own (torch's message is not repeated)."""
    text = str(error)
    if isinstance(error, pickle.UnpicklingError) and text.startswith("Weights only load failed"):
        name = re.search(r"GLOBAL (\S+)", text)
        return (f"it would call {name.group(1)} when loaded, which was refused" if name else
                "it holds something other than tensors, numbers and words, which was refused")
    return f"it is damaged, truncated or another kind of file: {type(error).__name__} on loading"


def load(path: str | Path, device: str | torch.device = "cpu"):
    """What ``path`` holds, onto ``device``; ``integrity.DamagedFile`` when it does not match its
    seal, ``NotACheckpoint`` when it does not load as plain tensors and numbers (an error reading
    the file, or of memory, is raised as it is)."""
    integrity.verify(path)
    try:
        with warnings.catch_warnings():  # torch's unpickler warns of a pickle protocol it did not write
            warnings.filterwarnings("ignore", module=r"torch\._weights_only_unpickler")
            return torch.load(path, map_location=device, weights_only=True)
    except (OSError, MemoryError, torch.cuda.OutOfMemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - whatever torch's unpickler raises: a file it cannot take
        raise NotACheckpoint(path, _why(e)) from None
