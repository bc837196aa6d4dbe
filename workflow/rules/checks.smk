# The usual mistakes, each stopped before any job runs with one sentence saying what to do: a
# catalogue id given as a target, SLURM or CUDA missing, a damaged result, a failed job's advice.
# (Snakefile: onstart runs check_slurm and check_device, onerror repeats job_instruction.)

_STARTED = time.time()


def stop(sentence):
    """End the run with ``sentence`` as its last words: a WorkflowError raised here would be
    followed by the Snakefile line that raised it, and one raised in `onerror` by Snakemake's own
    "At least one job did not complete successfully"."""
    print(sentence, file=sys.stderr, flush=True)
    raise SystemExit(1)


def as_target(word):
    """``word`` as the target it would be: lower case, - as _, and the _ after a paper's code put
    back (``OP-F1``, ``OP_F1``, ``opf1`` -> ``op_f1``)."""
    low = word.lower().replace("-", "_")
    for code in map(str.lower, catalogue.PAPERS):
        if low.startswith(code) and re.fullmatch(r"[a-z]+[0-9]+[a-z]?", low[len(code):]):
            return f"{code}_{low[len(code):]}"
    return low


def misnamed_targets(argv):
    """``{word: id}``: command-line words that stand for an experiment but are not its target: its
    catalogue id (`OP-F1`), or its target in other case or without its _ (`OP_F1`, `opf1`).
    Snakemake hands its targets to the DAG only after reading this file and then says just "No rule
    to produce OP-F1", so the command line is the one place to catch this mistake early."""
    targets = {paths.target(e): e for e in EXPERIMENTS}
    return {w: targets[as_target(w)] for w in argv
            if as_target(w) in targets and w != as_target(w) and not Path(w).exists()}


def unknown_targets(argv):
    """Command-line words shaped like an experiment's target (``op_f9``, ``OP_F9``: a paper, ``_``,
    a figure or table and its number) that name none; Snakemake would say only "No rule to produce op_f9"."""
    known = {paths.target(e) for e in EXPERIMENTS}
    shaped = re.compile(r"^[a-z]+_[a-z]+[0-9]+[a-z]?$")
    return [w for w in argv if shaped.match(as_target(w)) and as_target(w) not in known and not Path(w).exists()]


def missing_parts(argv):
    """``[(word, id, the files there)]``: command-line words that name a part's file (its rows, masks
    or record of trained runs) that no job of this scale writes (``RP-F3/group99.csv`` where RP-F3
    has one group); Snakemake would end on an input function's traceback."""
    found = []
    for w in argv:
        shape = re.fullmatch(rf"{re.escape(RESULTS)}/([A-Z]+)/([^/]+)/(masks/|trained/)?([^/]+)\.(csv|pt|json)",
                             os.path.normpath(os.path.relpath(w) if os.path.isabs(w) else w))
        if not shape or shape.group(2) not in EXPERIMENTS or shape.group(2) in SOURCES or Path(w).exists():
            continue
        paper, exp, kind, key, ext = shape.groups()
        if kind and not (catalogue.entry(exp).masks if kind == "masks/" else catalogue.entry(exp).trains):
            continue
        jobs = measure_jobs(exp)  # a job's rows by its key; masks and trained runs by their part's
        known = list(jobs) if not kind else [k for keys in jobs.values() for k in keys]
        if paper == catalogue.paper_of(exp) and key not in known:
            found.append((w, exp, [f"{k}.{ext}" for k in known]))
    return found


def config_words(argv):
    """The command line's `--config` (`-C`) words, as typed: a suggested command repeats them."""
    words, inside = [], False
    for w in argv:
        if w.startswith("--config="):
            words.append(w.split("=", 1)[1])
            inside = False
        elif w in ("--config", "-C"):
            inside = True
        elif inside and w.startswith("-"):
            inside = False
        elif inside:
            words.append(w)
    return [shlex.quote(w) for w in words]


def some(keys):
    """``group0.csv, group1.csv, group2.csv, ..., group15.csv (16 in all)``: a list a sentence can hold."""
    return ", ".join(keys) if len(keys) <= 6 else f"{', '.join(keys[:3])}, ..., {keys[-1]} ({len(keys)} in all)"


if workflow.is_main_process and misnamed_targets(sys.argv[1:]):
    _named = misnamed_targets(sys.argv[1:])
    _one = len(_named) == 1
    _ids = all(w.lower() == e.lower() for w, e in _named.items())
    _what = (("is a catalogue id, not a target" if _one else "are catalogue ids, not targets") if _ids
             else ("is not a target" if _one else "are not targets"))
    stop(
        f"{', '.join(_named)} {_what}: build {'it' if _one else 'them'} with "
        f"`{integrity.command(' '.join(dict.fromkeys(map(paths.target, _named.values()))), settings=config_words(sys.argv[1:]), cores=False)}` "
        "(the id in lower case, - as _); `snakemake --list-target-rules` lists every target."
    )


if workflow.is_main_process and unknown_targets(sys.argv[1:]):
    _unknown = unknown_targets(sys.argv[1:])
    _papers = sorted({as_target(w).split("_")[0] for w in _unknown})
    _theirs = [paths.target(e) for e in EXPERIMENTS if paths.target(e).split("_")[0] in _papers]
    stop(
        f"{', '.join(_unknown)} {'names' if len(_unknown) == 1 else 'name'} no experiment of config.yaml"
        + (f": the targets of {', '.join(p.upper() for p in _papers)} are {', '.join(_theirs)}" if _theirs else "")
        + "; `snakemake --list-target-rules` lists every target."
    )


if workflow.is_main_process and missing_parts(sys.argv[1:]):
    _word, _exp, _known = missing_parts(sys.argv[1:])[0]
    stop(
        f"{_word} names no part of {_exp} at the {SCALE} scale, whose files there are {some(_known)}; "
        f"`{integrity.command(paths.target(_exp), settings=config_words(sys.argv[1:]), cores=False)}` builds them all."
    )


def check_slurm():
    """Before any job is submitted through the SLURM executor, check once that SLURM's commands are
    on the PATH and its controller answers: without this the plugin fails only after a minute of
    repeated "No such file or directory: 'sacct'" or "Unable to contact slurm controller"."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm":
        return
    leave = "or leave out `--profile profiles/slurm` to run on this machine"
    missing = [cmd for cmd in ("sbatch", "scontrol") if shutil.which(cmd) is None]
    if missing:
        stop(
            f"The SLURM executor needs SLURM's commands, but `{missing[0]}` is not on the PATH: run "
            f"Snakemake on the cluster's login node (or load its slurm module), {leave}."
        )
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=60)
        answer = (ping.stdout + ping.stderr).strip().splitlines()
        ok = ping.returncode == 0
    except (OSError, subprocess.TimeoutExpired) as e:
        answer, ok = [str(e)], False
    if not ok:
        stop(
            f"The SLURM controller does not answer (`scontrol ping`: {answer[0] if answer else 'no output'}): "
            f"start slurmctld or run from a node that reaches it, {leave}."
        )
    known = partitions()
    for partition, where in asked_partitions().items():
        if known and partition not in known:
            stop(
                f"slurm_partition={partition} ({where}) is not a partition of this cluster: `sinfo` lists "
                f"{', '.join(known)}. Set one of those (ACCOUNT, CPU_PARTITION and GPU_PARTITION in the "
                "documentation's commands are placeholders) and run again."
            )


def partitions():
    """The partitions `sinfo` lists (the default one without its `*`), or [] when it cannot say."""
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return list(dict.fromkeys(p.rstrip("*") for p in out.split()))


def asked_partitions():
    """{partition: where the run asks for it}: `--default-resources` and each rule's `--set-resources`
    (the profile's included)."""
    settings = workflow.resource_settings
    sources = [("--default-resources", settings.default_resources)]
    sources += [(f"--set-resources {rule}:slurm_partition", r) for rule, r in (settings.overwrite_resources or {}).items()]
    found = {}
    for where, resources in sources:
        for arg in getattr(resources, "args", None) or []:
            name, _, value = arg.partition("=")
            if name == "slurm_partition" and value.strip("'\""):
                found.setdefault(value.strip("'\""), where)
    return found


def sbatch_refusal(log):
    """One sentence for jobs that `sbatch` refused (an account, partition or QOS this cluster does not
    have): the plugin says so once per job, and the run then ends on Snakemake's own words."""
    logs = [log] if isinstance(log, (str, Path)) else list(log or [])  # Snakemake hands over one path or several
    text = "".join(Path(f).read_text(errors="replace") for f in logs if Path(f).is_file())
    refused = re.findall(r"sbatch: error: ([^\n']+)", text)
    if not refused:
        return None
    known = partitions()
    return (f"sbatch refused this run's jobs: {refused[0].strip()}. Check what they ask for in --default-resources "
            "and --set-resources (slurm_account, slurm_partition, qos, mem_mb, runtime; ACCOUNT, CPU_PARTITION and "
            f"GPU_PARTITION in the documentation's commands are placeholders){'; `sinfo` lists partitions ' + ', '.join(known) if known else ''}.")


def unwritable_data_dir():
    """A warning where the data folder cannot be written and holds no `fetched/` yet (a read-only
    mount of the files): a job that fetches a dataset records what it found there, and Snakemake
    would stop on "Failed to create output directory", naming no fix, before the job could."""
    fetched = Path(DATA) / "fetched"
    if not Path(DATA).is_dir() or fetched.is_dir() or writable(Path(DATA)):
        return None
    return (f"warning: the data folder {DATA} cannot be written here, and a job that fetches a dataset records "
            f"what it found in {fetched}/: if this run needs one, copy the data folder to a folder DIR you can "
            f"write (`cp -r {DATA} DIR`) and give that as data_dir (`--config data_dir=DIR`, last).")


def writable(folder: Path) -> bool:
    """Whether a file can be made in ``folder`` (``os.access`` says yes to root on a read-only mount)."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def check_device():
    """`device: cuda` on a machine whose torch sees no CUDA device stops the run before any job
    (each would die on the driver's traceback); on a cluster the jobs' nodes decide, not this one."""
    plugin = workflow.executor_plugin
    if not str(config["device"]).startswith("cuda") or (plugin is not None and plugin.name != "local"):
        return
    import torch

    if not torch.cuda.is_available():
        stop(
            f"device={config['device']} in the config, but torch sees no CUDA device on this machine: run with "
            "`--config device=auto` (CUDA where there is one, else the CPU) or `device=cpu`, or submit to GPU nodes "
            "with `--profile profiles/slurm`."
        )


def sweep_damaged():
    """Results that are not what their writer sealed (a table, part file, mask or net cut short or
    changed; reluinit.integrity.sweep) are moved aside before the DAG is built, each named once:
    a target's file is then rebuilt by this run, and a file only other jobs read is rebuilt when
    one of them next runs, or at once with the command given. Never read either way."""
    from reluinit import integrity

    for path, aside, reason in integrity.sweep(RESULTS):
        print(integrity.swept(path, aside, reason, paths.trained_by(path)), file=sys.stderr)


# Command-line words after which Snakemake plans, lists or reports but runs no job.
NOT_RUNNING = {"-n", "--dry-run", "--dryrun", "--just-print", "--lint", "--summary", "-S", "--detailed-summary",
               "-D", "--list-target-rules", "--list-rules", "-l", "--report", "--dag", "--rulegraph", "--filegraph",
               "--unlock", "--cleanup-metadata", "--delete-all-output", "--delete-temp-output", "--touch", "-t"}


def runs_jobs(argv):
    """Whether this command line runs jobs (no -n, --lint, --report, ...; -np counts as -n)."""
    return not any(a in NOT_RUNNING or (a.startswith("-") and not a.startswith("--") and "n" in a[1:]) for a in argv)


def job_instruction():
    """What a job that failed during this run said to do (the newest line that jobs.TODO_PREFIX
    marks in a log written since the run started: a fetch job's missing dataset, any job's damaged
    input and the command that rebuilds it), or None."""
    from reluinit.pipeline.jobs import TODO_PREFIX

    root = Path(log_file("x")).parent
    logs = [p for p in root.rglob("*.log") if p.stat().st_mtime >= _STARTED] if root.is_dir() else []
    for log in sorted(logs, key=lambda p: p.stat().st_mtime, reverse=True):
        todo = [line.split(TODO_PREFIX, 1)[1] for line in log.read_text().splitlines() if TODO_PREFIX in line]
        if not todo:
            continue
        if log.parent.name == "datasets":
            return f"{log.stem} is not available here. {todo[-1].rstrip('.')}, or run `--config scale=quick`, which needs no download."
        return todo[-1]
    return None


if workflow.is_main_process and runs_jobs(sys.argv[1:]):
    sweep_damaged()  # before the DAG is built: what it moves aside, this run rebuilds
    if warning := unwritable_data_dir():
        print(warning, file=sys.stderr)


def machine_mb():
    """This machine's memory in MB when jobs run here (None under a cluster executor, whose jobs
    get the memory they declare)."""
    plugin = workflow.executor_plugin
    if plugin is not None and plugin.name not in ("local", "dryrun", "touch"):
        return None
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20


# Commands that build no DAG (listing rules, linting, unlocking) skip the probe of the jobs a count
# makes: it imports an experiment's code (torch) the first time, a second of every such command.
NO_DAG = {"--list-target-rules", "--list-rules", "-l", "--lint", "--unlock", "--cleanup-metadata"}
_TOO_LARGE = (bounds.refused(config, SCALE, machine_mb(), probe=not NO_DAG & set(sys.argv[1:]))
              if workflow.is_main_process else [])
if _TOO_LARGE:
    stop(_TOO_LARGE[0])  # a width, or a count of nets, draws or steps, that no job (or plan) could hold


def shared_refused():
    """The first table whose shared runs (config `shared`) have no twin in the experiment it names, or
    one that trains otherwise, as its sentence with the fix; None when every one pairs. Each is
    asked again when its figure job is planned (inputs.smk shared_rows)."""
    for exp in EXPERIMENTS:
        try:
            shared.twins(config, exp, SCALE)
        except shared.SharedRunsError as e:
            return str(e)
    return None


# The same probe's commands: pairing imports the experiments' code the first time (provenance.memo).
_UNSHARED = shared_refused() if workflow.is_main_process and not NO_DAG & set(sys.argv[1:]) else None
if _UNSHARED:
    stop(_UNSHARED)
