# Every catalogue experiment goes the same way: its jobs (parts) measure and write rows (or
# train and write rows), and the figure job combines the rows into one tidy table and plots it. The science is in
# reluinit.experiments.<paper>; these rules only move files. Each rule's script is named after it,
# workflow/scripts/<rule>.py (a rule made per id or paper after its family: figure_<id> runs
# figure.py, measure_<paper> measure_paper.py, figures_<paper> figures_paper.py); the scale's
# `batching` (batching.smk) decides which of the measuring and figure rules run.


wildcard_constraints:
    paper="[A-Z]+",
    part="[A-Za-z0-9_=.-]+",


rule prune:
    """Prune one part's nets at initialization: the masks (bit-packed) and what they do, per layer."""
    input:
        dataset_inputs,
    output:
        masks=paths.masks(RESULTS, "{exp}", "{part}", paper="{paper}"),
        facts=paths.masks(RESULTS, "{exp}", "{part}", paper="{paper}", ext="csv"),
    wildcard_constraints:
        exp=one_of(PRUNING),
    params:
        settings=lambda w: exp_settings(w.exp),
        scale=SCALE,
        device=config["device"],
        code=lambda w: masks_code(w.exp),  # the library code it runs: edits rerun it
        computes=lambda w: catalogue.code_names(w.exp)["masks"],
    message:
        "{wildcards.exp} [{wildcards.part}]: pruning at the {params.scale} scale by {params.computes} -> {output.masks};"
        " resources: threads={threads} mem_mb={resources.mem_mb} runtime={resources.runtime}m"
    log:
        log_file("{paper}/{exp}/masks/{part}"),
    benchmark:
        benchmark_file("{paper}/{exp}/masks/{part}")
    threads: PRUNE_THREADS
    # Pruning and training first: they are the long poles (a quick build's RP-T5 trains for a
    # minute; at the paper scale, GPU-hours), the measurements and figures fill in beside them.
    # (Not the longest declared runtime first: the smoke run then started the two largest jobs,
    # ResNet104's, side by side, and one was killed for memory on a 24 GB machine.)
    priority: 2
    resources:
        mem_mb=lambda w: prune_resources(w)["mem_mb"],
        runtime=lambda w: prune_resources(w)["runtime"],
    conda:
        "../../envs/science.yaml"
    script:
        "../scripts/prune.py"


# The rule `measure` runs every measuring job but those of the measure_<paper> rules below
# (`batching: paper`: a paper's experiments of random nets, MEASURE_GROUPS).
rule measure:
    """Measure one part of a catalogue experiment on random (or trained) nets: its table's rows."""
    input:
        measure_inputs,
    output:
        paths.part(RESULTS, "{exp}", "{part}", paper="{paper}"),
    wildcard_constraints:
        exp=one_of([e for e in EXPERIMENTS if e not in TRAINING and e not in SOURCES and e not in GROUPED]),
    params:
        settings=lambda w: exp_settings(w.exp),
        scale=SCALE,
        device=config["device"],
        code=lambda w: measure_code(w.exp),  # the library code it runs: edits rerun it
        masks=lambda w: masks_file(w),
    message:
        "{wildcards.exp} [{wildcards.part}] at the {params.scale} scale -> {output}; settings: {params.settings}"
    log:
        log_file("{paper}/{exp}/{part}"),
    benchmark:
        benchmark_file("{paper}/{exp}/{part}")
    threads: MEASURE_THREADS
    resources:
        mem_mb=plan.MEASURE["mem_mb"],
        runtime=plan.MEASURE["runtime"],
    conda:
        "../../envs/science.yaml"
    script:
        "../scripts/measure.py"


for _name, _exps in MEASURE_GROUPS.items():
    _paper = catalogue.paper_of(_exps[0])

    rule:
        f"""Measure {_paper}'s experiments of random nets, {', '.join(_exps)}, in one job: each one's rows as its own job writes them."""
        name:
            _name
        input:
            unpack(lambda w, exps=_exps: {paths.id_key(e): measure_inputs(SimpleNamespace(exp=e, part=plan.ALL_PARTS)) for e in exps}),
        output:
            **{paths.id_key(e): paths.part(RESULTS, e, plan.ALL_PARTS) for e in _exps},
        params:
            exps=_exps,
            settings={e: exp_settings(e) for e in _exps},
            scale=SCALE,
            device=config["device"],
            code=lambda w, exps=tuple(_exps): measures_code(exps),  # the library code it runs: edits rerun it
        message:
            "{params.exps} at the {params.scale} scale, one after another (each one's log names its settings)"
        log:
            **{paths.id_key(e): log_file(f"{_paper}/{e}/{plan.ALL_PARTS}") for e in _exps},
        benchmark:
            benchmark_file(f"{_paper}/measure")
        threads: MEASURE_THREADS
        resources:
            mem_mb=plan.MEASURE["mem_mb"],
            runtime=plan.MEASURE["runtime"],
        conda:
            "../../envs/science.yaml"
        script:
            "../scripts/measure_paper.py"


# Training runs of an experiment, on a GPU on a cluster: one job trains a part's runs and records
# their final checkpoints. Each run keeps a checkpoint (every epoch) outside the declared outputs,
# so a job killed by a time limit or preemption resumes where it stopped when it is rerun (the
# SLURM profile retries once). A checkpoint carries its run's settings and is resumed only by a run
# of the same settings. Its code fingerprint covers only what its runs measure during training (EP's
# lengths per epoch, kept in the checkpoints): hours of training are not redone for any other
# library edit (docs/results.md, "What reruns, and what does not").
rule train_part:
    """Train one part's runs of an experiment that trains (resumable checkpoints); record the final ones."""
    input:
        measure_inputs,
    output:
        paths.trained_part(RESULTS, "{exp}", "{part}", paper="{paper}"),
    wildcard_constraints:
        exp=one_of(TRAINING),
    params:
        settings=lambda w: exp_settings(w.exp),
        scale=SCALE,
        device=config["device"],
        checkpoints=checkpoint_dir,
        masks=lambda w: masks_file(w),
        code=lambda w: during_code(w.exp),  # what its runs measure while they train: edits retrain
    message:
        "{wildcards.exp} [{wildcards.part}]: training at the {params.scale} scale -> {output}; resources:"
        " gpu={resources.gpu} mem_mb={resources.mem_mb} runtime={resources.runtime}m"
    log:
        log_file("{paper}/{exp}/{part}"),
    benchmark:
        benchmark_file("{paper}/{exp}/{part}")
    threads: train_threads
    priority: 1  # after its masks, before the measurements (rule prune)
    resources:
        mem_mb=lambda w: train_resources(w)["mem_mb"],
        runtime=lambda w: train_resources(w)["runtime"],
        gpu=lambda w: train_resources(w).get("gpu", 0),
        cpus_per_gpu=lambda w: train_resources(w).get("cpus_per_gpu", 0),
    conda:
        "../../envs/science.yaml"
    script:
        "../scripts/train_part.py"


# A training part's rows, made from the final checkpoints its training job recorded: training
# nothing, under the code fingerprint of the experiment's measurement, so that an edit of how
# trained nets are measured (TG-F6's line growth, EP-F6's noise) reruns this job and never training.
rule measure_trained:
    """Measure one training part's trained runs (from their checkpoints): its table's rows."""
    input:
        measure_inputs,
        trained=paths.trained_part(RESULTS, "{exp}", "{part}", paper="{paper}"),
    output:
        paths.part(RESULTS, "{exp}", "{part}", paper="{paper}"),
    wildcard_constraints:
        exp=one_of(TRAINING),
    params:
        settings=lambda w: exp_settings(w.exp),
        scale=SCALE,
        device=config["device"],
        checkpoints=checkpoint_dir,
        masks=lambda w: masks_file(w),
        code=lambda w: measure_code(w.exp),  # the library code it runs: edits rerun it, not the training
    message:
        "{wildcards.exp} [{wildcards.part}]: measuring its trained runs at the {params.scale} scale -> {output}"
    log:
        log_file("{paper}/{exp}/measured/{part}"),
    benchmark:
        benchmark_file("{paper}/{exp}/measured/{part}")
    threads: MEASURE_THREADS
    resources:
        mem_mb=lambda w: plan.measure_trained_resources(config, w.exp, w.part)["mem_mb"],
        runtime=plan.MEASURE["runtime"],
    conda:
        "../../envs/science.yaml"
    script:
        "../scripts/measure_trained.py"


# The parts of an experiment (or of its source) become its tidy table and its figure in one
# job: one Python start-up per figure instead of two. One rule per experiment, since the table
# (under the paper's folder) and the figure (under figures/) share no wildcard but the id. Where
# the scale's `batching` is `paper` (the quick scale), one rule per paper draws its figures of
# random nets (FIGURE_JOBS; figures of trained or pruned nets and optional ones keep their own).


for _name, _exps in FIGURE_JOBS.items():
    if len(_exps) > 1:
        continue
    _exp = _exps[0]

    rule:
        f"""{_exp}'s table from its parts, and its figure ({catalogue.paper_of(_exp)}, CATALOGUE.md)."""
        name:
            _name
        input:
            lambda w, exp=_exp: table_parts(exp),  # planned with the job: its experiment's parts
        output:
            table=paths.table(RESULTS, _exp),
            pdf=figure_files(_exp)[0],
            png=figure_png(_exp),
            built=paths.built(RESULTS, _exp),
        params:
            exp=_exp,
            paper=paper_title(catalogue.paper_of(_exp)),
            settings=exp_settings(SOURCES.get(_exp, _exp)),
            scale=SCALE,
            shared=lambda w, exp=_exp: shared_rows(exp),  # the rows it takes from another's parts (config `shared`)
            # the plotting code it runs (edits rerun this figure only); asked when the job is
            # planned, so parsing the workflow imports no plotting code
            code=lambda w, exp=_exp: figure_code(exp),
            # What the caption says: the scale and settings this figure's table was built with,
            # read back at report time (not this invocation's config; derived from an output, so
            # never a reason to rerun).
            built=lambda w, output: reports.built_with(output.built),
            computes=lambda w, exp=SOURCES.get(_exp, _exp): catalogue.code_names(exp)["measure"],
            plots=lambda w, exp=_exp: catalogue.code_names(exp)["figure"],
        message:
            "{params.exp}: table {output.table} from its parts, figure {output.png}; rows computed by {params.computes}, "
            "plotted by {params.plots}"
        log:
            log_file(f"figures/{_exp}"),
        benchmark:
            benchmark_file(f"figures/{_exp}")
        conda:
            "../../envs/plotting.yaml"
        script:
            "../scripts/figure.py"


# A paper's figures of random nets in one job (`batching: {<scale>: paper}`): each id's table, figure, record
# and log are the files its own job writes (named by the id: table_OP_F1, png_OP_F1, ...). The
# report's caption of each figure is the one of its own job, read from these per-id params.
for _name, _exps in FIGURE_JOBS.items():
    if len(_exps) == 1:
        continue
    _paper = catalogue.paper_of(_exps[0])

    rule:
        f"""{_paper}'s tables from their parts, and its figures {', '.join(_exps)} in one job (CATALOGUE.md)."""
        name:
            _name
        input:
            unpack(lambda w, exps=_exps: {paths.id_key(e): table_parts(e) for e in exps}),
        output:
            **{f"{kind}_{paths.id_key(e)}": path for e in _exps for kind, path in [
                ("table", paths.table(RESULTS, e)), ("pdf", figure_files(e)[0]), ("png", figure_png(e, "../report/figures.rst")),
                ("built", paths.built(RESULTS, e))]},
        params:
            exps=_exps,
            tables=[paths.table(RESULTS, e) for e in _exps],
            paper=paper_title(_paper),
            settings={e: exp_settings(SOURCES.get(e, e)) for e in _exps},
            scale=SCALE,
            code=lambda w, exps=tuple(_exps): figures_code(exps),  # every figure's plotting code
            built=lambda w, output, exps=_exps: {e: reports.built_with(output[f"built_{paths.id_key(e)}"]) for e in exps},
            made_by=lambda w, exps=tuple(_exps): "; ".join(
                f"{e}: rows computed by {catalogue.code_names(SOURCES.get(e, e))['measure']}, "
                f"plotted by {catalogue.code_names(e)['figure']}" for e in exps),
        message:
            "{params.exps}: tables {params.tables} from their parts, and their figures; {params.made_by}"
        log:
            **{paths.id_key(e): log_file(f"figures/{e}") for e in _exps},
        benchmark:
            benchmark_file(f"figures/{_paper}")
        conda:
            "../../envs/plotting.yaml"
        script:
            "../scripts/figures_paper.py"


# One short target per catalogue id: `snakemake op_f1` builds results/figures/OP-F1.{pdf,png}.
for _exp in EXPERIMENTS:

    rule:
        f"""{_exp}: its table and figure (see CATALOGUE.md)."""
        name:
            paths.target(_exp)
        input:
            figure_files(_exp),
            paths.table(RESULTS, _exp),  # a table moved aside as damaged is rebuilt by its target
        localrule: True
