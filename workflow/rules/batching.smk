# How the scale's jobs are cut: the config's `batching` (one value per scale, described once, in
# workflow/schemas/config.schema.yaml). `part`: a `measure` (or `train_part`) job per part and a
# figure_<id> job per figure. `paper` (the quick scale): a paper's experiments of random nets are
# measured by one measure_<paper> job and drawn by one figures_<paper> job, and `measure` runs every
# other experiment's parts in one job. reluinit.pipeline.plan decides; the rules read these.


@functools.cache
def measure_jobs(exp):
    """``{job: [parts]}`` of a measuring experiment (plan.measure_jobs)."""
    return plan.measure_jobs(config, exp, SCALE)


# The measure_<paper> jobs ({} at `part`) and the experiments they measure.
MEASURE_GROUPS = plan.measure_groups(config, [e for e in DEFAULT if e not in TRAINING and e not in SOURCES], SCALE)
GROUPED = {e for exps in MEASURE_GROUPS.values() for e in exps}
# Every figure job: figure_<id> (one id) or figures_<paper> (a paper's random nets). Optional
# figures always have a job of their own.
FIGURE_JOBS = {
    **plan.figure_jobs(config, DEFAULT, SCALE),
    **{plan.figure_rule(e): [e] for e in EXPERIMENTS if e not in DEFAULT},
}
