# How the scale's jobs are cut, by the config's `batching` (`part` or `paper` per scale; what each
# does is described in one place, the `batching` key of workflow/schemas/config.schema.yaml).
# reluinit.pipeline.plan decides; the measuring and figure rules read what it decided from here.


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
