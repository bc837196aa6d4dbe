"""Modules imported on first use. An experiment's module holds both its measurement and its figure
code; a measurement job (Python start-up is most of a quick job) then never pays for matplotlib
and seaborn, which only the figure job calls."""

from __future__ import annotations

import importlib
import types


class OnUse(types.ModuleType):
    """Stands for module ``name`` and imports it (after ``first``) when an attribute is asked for."""

    def __init__(self, name: str, *first: str):
        super().__init__(name)
        self._first = first

    def __getattr__(self, attr: str):
        if attr.startswith("__"):  # protocol probes (copy, pickle, inspect) do not import
            raise AttributeError(attr)
        for name in self._first:
            importlib.import_module(name)
        return getattr(importlib.import_module(self.__name__), attr)


# The figure code's modules: plotting first, which sets matplotlib's file backend.
plotting = OnUse("reluinit.plotting")
sns = OnUse("seaborn", "reluinit.plotting")
matplotlib = OnUse("matplotlib", "reluinit.plotting")
ticker = OnUse("matplotlib.ticker", "reluinit.plotting")
