"""What the pruning API (``reluinit.pruning``) takes, checked before anything is scored or changed:
a density, a batch of ``data=``, and masks for a model's weights. Each refusal is one sentence that
names the argument and what to give instead."""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import torch

# The keys a dict batch's inputs and targets are read from, the first present of each.
INPUT_KEYS = ("x", "input", "inputs", "image", "images")
TARGET_KEYS = ("y", "target", "targets", "label", "labels")


def _what(value) -> str:
    """``value`` in a few words, for a message: its type, and its length, keys or shape."""
    if value is None:
        return "None"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} item{'s' * (len(value) != 1)}"
    if isinstance(value, Mapping):
        return f"a dict with the keys {', '.join(map(repr, list(value)[:6]))}"
    if torch.is_tensor(value):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor of shape {tuple(value.shape)}"
    return f"{value!r} (a {type(value).__name__})"


def checked_density(density):
    """``density`` itself when it is a real number in [0, 1] (a Python or NumPy number, not a bool);
    otherwise a ``TypeError`` or ``ValueError`` that says what it must be."""
    if isinstance(density, bool) or not isinstance(density, numbers.Real):
        hint = ("; for each layer's own fraction pass scope='layer'" if isinstance(density, Mapping)
                else "; pass float(density)" if torch.is_tensor(density) and density.numel() == 1 else "")
        raise TypeError(f"density must be a number in [0, 1] (the fraction of weights kept), got {_what(density)}{hint}")
    if not 0 <= density <= 1:
        raise ValueError(f"density must be in [0, 1] (the fraction of weights kept), got {density}")
    return density


def batch_xy(batch, labels: bool = True) -> tuple:
    """The inputs and targets of one batch of ``data=``: an ``(x, y)`` tuple or list (items after y,
    such as a sample's index, are ignored) or a dict with a key of ``INPUT_KEYS`` and one of
    ``TARGET_KEYS``. With ``labels`` False (a pruner that reads only inputs), ``(x,)`` or a dict
    without targets is read too, its target None."""
    if isinstance(batch, (tuple, list)) and len(batch) >= 1 + labels:
        return batch[0], batch[1] if len(batch) > 1 else None
    if isinstance(batch, Mapping):
        x = next((batch[k] for k in INPUT_KEYS if k in batch), None)
        y = next((batch[k] for k in TARGET_KEYS if k in batch), None)
        if x is not None and (y is not None or not labels):
            return x, y
    raise TypeError(f"prune: a batch of data= is {_what(batch)}: give (x, y) batches, tuples or lists (items after y "
                    "are ignored) or dicts with the keys 'x' and 'y' (or 'input' and 'target', 'image' and 'label')")


def checked_masks(masks: dict, tied: dict[str, str], shapes: dict[str, torch.Size], where: str) -> None:
    """Masks that ``where`` (``apply_masks``, ``to_torch_prune``) can put on a model whose conv and
    linear weights are ``tied`` (``{"<layer>.weight": the name its tensor is masked under}``, a
    weight shared by several layers under the first's) of ``shapes``: a boolean tensor of its
    weight's shape for each known name, one for each tensor."""
    seen: dict[str, str] = {}
    for name, mask in masks.items():
        if name not in tied:
            known = list(tied)
            raise ValueError(f"{where}: {name!r} is not a conv or linear weight of the model: masks are keyed by "
                             f"weight names, here {', '.join(known[:5])}{', ...' if len(known) > 5 else ''}")
        if not torch.is_tensor(mask) or mask.dtype != torch.bool:
            raise TypeError(f"{where}: the mask for {name} is {_what(mask)}, not a boolean tensor: give True for "
                            "each weight kept (e.g. mask != 0)")
        if mask.shape != shapes[name]:
            raise ValueError(f"{where}: the mask for {name} has shape {tuple(mask.shape)} but the weight has "
                             f"{tuple(shapes[name])}: give a mask of the weight's shape")
        if tied[name] in seen:
            raise ValueError(f"{where}: {seen[tied[name]]} and {name} are one tensor (tied weights): give it one "
                             f"mask, under {tied[name]}")
        seen[tied[name]] = name
