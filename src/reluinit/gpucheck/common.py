"""What the GPU check's stages share: the columns of every table it writes, the report's file
name, the device clock and generated data (one module below the stages, so that none imports
another's, nor the package's)."""

from __future__ import annotations

# Columns of every table the check writes (a test checks each file against them).
COLUMNS = {
    "facts": ["fact", "value"],
    "agreement": ["check", "item", "device_value", "cpu_value", "difference", "criterion", "passes", "note"],
    "throughput": ["family", "model", "dataset", "recipe", "experiments", "module", "parameters", "batch_size",
                   "precision", "channels_last", "augment", "engine", "steps_timed", "steps_per_s", "images_per_s",
                   "seconds_per_step", "eval_seconds_per_image", "train_images", "steps_per_epoch",
                   "seconds_per_epoch", "epochs", "projected_hours", "declared_hours", "baseline_workers",
                   "baseline_steps_per_s", "engine_gain", "status", "device"],
    "engines": ["family", "engine", "k", "depth", "batch_size", "precision", "steps_timed", "repeats",
                "seconds_per_step", "spread", "kernel_seconds_per_step", "run_steps_per_s", "gain_over_eager",
                "compile_seconds", "max_rel_difference_vs_eager", "status", "device"],
    "ensembles": ["nets", "k", "steps", "alone_s", "stacked_s", "ratio", "training_ratio", "stacked_run_steps_per_s",
                  "stacked_train_run_steps_per_s", "products_run_steps_per_s", "share_of_products",
                  "max_rel_difference", "max_rel_difference_float64", "differ_by", "device"],
    "packing": ["processes", "process", "steps_timed", "steps_per_s", "memory_mb", "aggregate_steps_per_s",
                "gain_over_one", "device"],
    "reference-check": ["experiment", "cell", "net", "quantity", "layer", "device_value", "reference_value",
                        "relative_difference", "tolerance", "within", "device_seconds_per_net",
                        "reference_seconds_per_net", "points", "note"],
    "gpu-cost": ["model", "dataset", "recipe", "experiments", "batch_size", "precision", "seconds_per_step",
                 "eval_seconds_per_image", "device"],
}
REPORT = "gpu-report.md"


def sync(device) -> None:
    """Wait for ``device``'s queued work (CUDA only), before a clock is read."""
    import torch  # here, not above: the package's command line starts without torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def generated(n: int, dev, shape, learnable: bool = False, seed: int = 3):
    """``n`` generated images and labels on ``dev``; ``learnable``: each class adds its own colour
    (a constant per channel) to the noise, which the net's global pooling sees at once, so that a
    few steps lower the loss."""
    import torch

    from ..training import DeviceData

    gen = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 10
    x = torch.randn(n, *shape, generator=gen)
    if learnable:
        x = x + 2 * torch.randn(10, shape[0], 1, 1, generator=torch.Generator().manual_seed(99))[y]
    return DeviceData(x, y, dev, channels_last=True)
