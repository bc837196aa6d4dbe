# Training: each net of a training spec (config `training:`) is trained once and its
# checkpoints kept; experiments that measure trained nets read them (rule `measure` input).


rule train:
    """Train one net of a training spec (LR's MNIST nets) and keep its checkpoints."""
    input:
        lambda w: dataset_input(train_settings(w.spec)["dataset"]),
    output:
        paths.trained(RESULTS, "{spec}", "{arch}", "{run}"),
    params:
        settings=lambda w: train_settings(w.spec),
        device=config["device"],
        # resumable state outside the declared output, resumed only by a run of the same settings
        checkpoint=lambda w: paths.train_checkpoint(RESULTS, w.spec, w.arch, w.run),
    wildcard_constraints:
        spec="[A-Za-z0-9-]+",
        arch="d[0-9]+w[0-9]+",
        run="[0-9]+",
    log:
        log_file("trained/{spec}/{arch}-run{run}"),
    benchmark:
        benchmark_file("trained/{spec}/{arch}-run{run}")
    threads: TRAIN_THREADS
    priority: 1  # before the measurements (rule prune)
    resources:
        mem_mb=plan.TRAIN["mem_mb"],
        runtime=plan.TRAIN["runtime"],
    conda:
        "../../envs/science.yaml"
    script:
        "../scripts/train.py"
