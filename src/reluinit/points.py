"""The points a trajectory joins, as TG and EP choose them: two test images of a dataset, or two
random vectors, normalised to unit root-mean-square coordinate.

"Normalised" (TG and EP alike): pixels in [0, 1], then every point scaled to norm sqrt(n_0), the
input scale for which N(0, sigma_w^2/k) weights give first-layer pre-activations of variance
sigma_w^2 ("accounting for input scaling", EP). Test images are indexed from 0.
"""

from __future__ import annotations

import functools

import torch

from . import datasets

DTYPE = torch.float64


def endpoints(s: dict, seed: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The two points a path joins, normalised (module doc): test images ``s["points"]`` of
    ``s["dataset"]`` when the settings name a dataset, else two random vectors of ``R^input_dim``
    drawn from ``seed``."""
    if "dataset" in s:
        x = test_points(s["dataset"], s["data_dir"], s["scale"], tuple(s["points"]))
    else:
        x = normalise(torch.randn(2, s["input_dim"], generator=torch.Generator().manual_seed(seed), dtype=DTYPE))
    return x[0].to(device), x[1].to(device)


@functools.lru_cache(maxsize=4)
def test_split(dataset: str, data_dir: str, scale: str) -> datasets.Split:
    """A dataset's test split, loaded once per job."""
    return datasets.load(dataset, data_dir, train=False, scale=scale)


@functools.lru_cache(maxsize=8)
def test_points(dataset: str, data_dir: str, scale: str, idx: tuple[int, ...]) -> torch.Tensor:
    """The normalised test images ``idx`` (every net of a sweep joins the same two images)."""
    data = test_split(dataset, data_dir, scale)
    if max(idx) >= len(data.x):
        raise ValueError(f"points {list(idx)} are beyond the {len(data.x)} test images of {data.name}")
    return normalise(data.x[list(idx)].flatten(1).to(DTYPE))


def normalise(x: torch.Tensor) -> torch.Tensor:
    """Rows scaled to norm sqrt(dimension): unit root-mean-square coordinate."""
    return x / x.norm(dim=1, keepdim=True) * x.shape[1] ** 0.5


def dataset_name(s: dict) -> str:
    """Where the points come from, as the loaded split names itself: a stand-in or a subset says
    so (e.g. "MNIST, 10,000-digit subset")."""
    if "dataset" not in s:
        return f"random R^{s['input_dim']}"
    return test_split(s["dataset"], s["data_dir"], s["scale"]).name
