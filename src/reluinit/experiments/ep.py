"""EP: expressive power of deep nets. EP-F1 here; the trajectory experiments come with the
trajectory engine."""

from __future__ import annotations

from . import Experiment, register
from .lr import plane_figure, plane_measure, net_parts, plane_summary


def f1_figure(table, s: dict):
    return plane_figure(table, s, f"EP-F1: input-space regions of a {s['depth']}-hidden-layer ReLU net, "
                                  f"width {s['width']}, layer by layer")


register(Experiment("EP-F1", net_parts, plane_measure, f1_figure, plane_summary))
