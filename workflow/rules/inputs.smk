# What a job reads: a measuring or training job's masks, trained nets and dataset, a figure job's
# parts, a notebook's tables and figures, the smoke report's jobs. Input functions, asked when a
# job is planned.


def measure_inputs(w):
    """Files a measurement (or training) job reads: its parts' pruning masks (an experiment that
    prunes), checkpoints of the trained nets they measure, and the fetch record of the dataset it
    draws inputs from (none at the quick scale)."""
    s = exp_settings(w.exp)
    trained = [paths.trained(RESULTS, *t) for key in job_parts(w) for t in catalogue.trained(w.exp, s, key)]
    return list(dict.fromkeys(masks_file(w) + trained + dataset_inputs(w)))


def job_parts(w):
    """The parts a measurement (or training) job runs: its own, or all of its experiment's where
    the scale's `batching` gives it one job (batching.smk)."""
    jobs = measure_jobs(w.exp)
    if w.part not in jobs:
        raise WorkflowError(f"{w.exp} has no job {w.part!r} at the {SCALE} scale; its jobs: {', '.join(jobs)}")
    return jobs[w.part]


def masks_file(w):
    """The masks of the job's parts (written by their `prune` jobs) where the experiment prunes:
    ``[]``, or one path per part in the job's order."""
    return [paths.masks(RESULTS, w.exp, key) for key in job_parts(w)] if catalogue.entry(w.exp).masks else []


def dataset_inputs(w):
    """The fetch records of the datasets an experiment's settings name (none at the quick scale)."""
    s = exp_settings(w.exp)
    names = ([s["dataset"]] if "dataset" in s else []) + s.get("datasets", [])
    return [f for name in names for f in dataset_input(name)]


def dataset_input(name):
    """Rule input for a dataset: its fetch record, or nothing when what is loaded at this scale
    ships with an installed package (the quick stand-ins, reluinit.datasets.QUICK_STAND_INS)."""
    def bundled():
        from reluinit.datasets import BUNDLED, resolve  # imports torch: asked once per version (provenance.memo)

        return resolve(name, SCALE) in BUNDLED

    if provenance.memo("bundled", [name, SCALE], bundled):
        return []
    return [f"{DATA}/fetched/{name}.json"]


def table_parts(exp):
    """The job files an experiment's table is made of, in part order (a view's are its source's),
    then those of the runs it takes from another experiment (config `shared`, shared_rows)."""
    source = SOURCES.get(exp, exp)
    return [paths.part(RESULTS, source, job) for job in measure_jobs(source)] + list(shared_rows(exp))


def shared_rows(exp):
    """``{part file: [run keys]}``: the parts of the experiment ``exp`` takes runs from (its config
    `shared`) and the runs whose rows its table takes from each ({} for most). Asked when its figure
    job is planned: a shared run without a twin there, or whose twin trains otherwise, stops the
    run with the fix (reluinit.pipeline.shared)."""
    try:
        taken = shared.source_parts(config, exp, SCALE)
    except shared.SharedRunsError as e:
        raise WorkflowError(str(e)) from None
    if not taken:
        return {}
    src = shared.source(config, exp, SCALE)
    job_of = {key: job for job, keys in measure_jobs(src).items() for key in keys}
    out = {}
    for key, runs in taken.items():
        out.setdefault(paths.part(RESULTS, src, job_of[key]), []).extend(runs)
    return out


def paper_inputs(paper):
    """Tables and figures of the experiments of ``paper`` built by default (not the optional
    ones, such as RP-T8 on ImageNet): what its notebook reads."""
    exps = [e for e in DEFAULT if catalogue.paper_of(e) == paper]
    return {
        "tables": [paths.table(RESULTS, e) for e in exps],
        "figures": [f for e in exps for f in figure_files(e)],
    }


def smoke_jobs(w):
    """The part files of the smoke subset (reluinit.pipeline.smoke.subset); only at the smoke scale."""
    from reluinit.pipeline import smoke  # imports torch (through datasets): only where the smoke scale runs

    if SCALE != "smoke":
        raise WorkflowError("`smoke` runs at the smoke scale: snakemake smoke --cores 2 --config scale=smoke")
    return smoke.targets(config, smoke.subset(config), RESULTS)
