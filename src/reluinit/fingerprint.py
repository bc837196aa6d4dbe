"""What determines one training run, so that a checkpoint is never resumed under other settings.

``settings_fingerprint``: the settings a run was started with (everything in its config block but
bookkeeping, and the run's own axes and seed). A checkpoint carries it, and a run resumes from a
checkpoint only when it matches (``training.Checkpoint``); ``changes`` names what differs, for the
log line that says why a run starts afresh. (The pipeline's code fingerprints are
``reluinit.pipeline.provenance``.)
"""

from __future__ import annotations

import json

# Settings that say how a job is scheduled or where files live, not what a run computes (``shared``:
# which of an experiment's runs another trains for it).
BOOKKEEPING = frozenset({"resources", "runs_per_job", "group_by", "optional", "data_dir", "shared"})
# A recipe's keys of that kind: whether runs train stacked (``ensemble``) changes float rounding,
# not the run, so a checkpoint written either way resumes the other way.
RECIPE_BOOKKEEPING = frozenset({"ensemble"})


def plain(value):
    """``value`` as JSON would give it back (tuples become lists, keys strings): what a
    checkpoint stores and what two fingerprints are compared in."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def settings_fingerprint(settings: dict, exclude=(), **run) -> dict:
    """What determines one training run: ``settings`` without bookkeeping (and ``exclude``),
    and the run's own values (``run``: its axes, seed, ...), as plain data."""
    kept = {k: v for k, v in settings.items() if k not in BOOKKEEPING and k not in set(exclude)}
    if isinstance(kept.get("recipe"), dict):
        kept["recipe"] = {k: v for k, v in kept["recipe"].items() if k not in RECIPE_BOOKKEEPING}
    return plain({**kept, **({"run": run} if run else {})})


def _flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def changes(old: dict | None, new: dict) -> list[str]:
    """``["recipe.lr 0.1 -> 0.05", ...]``: every dotted key whose value differs (missing keys
    read ``(none)``)."""
    a, b = _flat(old or {}), _flat(new)
    missing = "(none)"
    return [f"{k} {a.get(k, missing)} -> {b.get(k, missing)}" for k in sorted(set(a) | set(b))
            if a.get(k, missing) != b.get(k, missing)]
