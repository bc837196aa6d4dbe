# What a job asks for: threads, memory, runtime, GPUs (reluinit.pipeline.plan, whose
# `python -m reluinit.pipeline.plan` prints every job's). The SLURM profile submits these.

# Quick and smoke measurement jobs are mostly Python start-up, which is single-threaded: two at a
# time, one thread each (rules measure and measure_<paper>).
MEASURE_THREADS = 1 if SCALE in ("quick", "smoke") else plan.MEASURE["threads"]
# The quick scale's nets are small: two at a time, one thread each. A smoke job prunes the paper's
# net on the paper's batch (not cut short): its threads, so that on two cores two ResNet104s (16 GB
# each) never run side by side (rule prune).
PRUNE_THREADS = 1 if SCALE == "quick" else plan.MEASURE["threads"]
# One at the quick scale, where LR's tiny nets train as fast on one thread (the same weights, bit
# for bit) and two jobs run side by side instead of waiting for both cores to be free at once
# (the rules train_<spec>).
TRAIN_THREADS = 1 if SCALE == "quick" else plan.TRAIN["threads"]


def train_resources(w):
    """A training job's resources (reluinit.pipeline.plan.train_resources, which `python -m
    reluinit.pipeline.plan` prints for every job)."""
    return _train_resources(w.exp, w.part)


@functools.cache  # asked once per resource and job: the runs are listed once per job
def _train_resources(exp, part):
    return plan.train_resources(config, exp, part, SCALE)


def prune_resources(w):
    """A prune job's resources (reluinit.pipeline.plan.prune_resources): its part's training memory."""
    return _prune_resources(w.exp, w.part)


@functools.cache
def _prune_resources(exp, part):
    return plan.prune_resources(config, exp, part, SCALE)


def train_threads(w):
    """The CPUs a training job was given (cpus_per_gpu); one at the quick scale, where tiny nets
    train faster two jobs at a time, one thread each, than sharing threads (rule train_part)."""
    return 1 if SCALE == "quick" else train_resources(w).get("cpus_per_gpu", 2)
