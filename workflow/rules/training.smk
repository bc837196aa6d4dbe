# Training: the nets of a training spec (config `training:`) are trained once and their
# checkpoints kept; experiments that measure trained nets read them (rule `measure` input).
# One job per architecture trains all of its runs (seeds), stacked as one model where the recipe
# allows (reluinit.ensemble); each run still has its own file and resumable checkpoint. The runs
# are counted when the workflow is read, so each spec has a rule of its own (paths.train_rule).


for _spec in config.get("training") or {}:
    _settings = train_settings(_spec)
    _runs = range(_settings["runs"])

    rule:
        f"""Train the {len(_runs)} runs of one architecture of training spec {_spec} together; keep their checkpoints."""
        name:
            paths.train_rule(_spec)
        input:
            lambda w, dataset=_settings["dataset"]: dataset_input(dataset),  # asked when planned (imports torch)
        output:
            [paths.trained(RESULTS, _spec, "{arch}", r) for r in _runs],
        params:
            spec=_spec,
            runs=list(_runs),
            settings=_settings,
            device=config["device"],
            # resumable state outside the declared outputs, resumed only by a run of the same settings
            checkpoints=lambda w, spec=_spec, runs=_runs: [paths.train_checkpoint(RESULTS, spec, w.arch, r)
                                                           for r in runs],
        wildcard_constraints:
            arch="d[0-9]+w[0-9]+",
        message:
            "{params.spec} {wildcards.arch}: training runs {params.runs} -> {output}"
        log:
            log_file(f"trained/{_spec}/{{arch}}"),
        benchmark:
            benchmark_file(f"trained/{_spec}/{{arch}}")
        threads: TRAIN_THREADS
        priority: 1  # before the measurements (rule prune)
        resources:
            mem_mb=plan.TRAIN["mem_mb"],
            runtime=plan.TRAIN["runtime"],  # a job, whatever its runs: LR's 5 stacked took minutes
        conda:
            "../../envs/science.yaml"
        script:
            "../scripts/train.py"
