# Read before the config: the library on the path, Snakemake running in a folder that holds
# config.yaml, and config.yaml readable as YAML (Snakemake's own message for a file it cannot parse
# names neither the file nor the line) with no key set twice in it or in a --configfile (YAML keeps
# the second silently).
import shlex
import sys
from pathlib import Path

import yaml

# The science lives in the importable package under src/ (reluinit.pipeline.workflow_env says how
# jobs find it).
_SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, _SRC)

from reluinit.pipeline import workflow_env  # noqa: E402
from reluinit.pipeline.config import DuplicateKeyError, read_yaml, yaml_problem  # noqa: E402

workflow_env.export(_SRC)


def elsewhere_command(argv, checkout):
    """The command line ``argv`` (Snakemake's words) run in ``checkout``: `-d <checkout>` in place of
    any -d of its own (a --configfile stays where it was: Snakemake reads it before it moves)."""
    words, skip = [], False
    for w in argv:
        if skip or w.startswith("--directory="):
            skip = False
            continue
        if w in ("-d", "--directory"):
            skip = True
            continue
        words.append(w)
    return shlex.join(["snakemake", "-d", str(checkout), *words])


def twice_in(configfiles):
    """The first key a --configfile sets twice, as its sentence; None where none does (or where one
    is JSON that YAML cannot read: Snakemake read it)."""
    for f in configfiles:
        try:
            read_yaml(f)
        except DuplicateKeyError as e:
            return str(e)
        except yaml.YAMLError:
            continue
    return None


if not Path("config.yaml").exists() and Path(workflow.basedir, "config.yaml").exists():
    _UNREADABLE = (f"There is no config.yaml in {Path.cwd()}, the folder this Snakemake runs in (it reads its config "
                   f"and writes its results there): run it from the checkout, {workflow.basedir}, or name the checkout "
                   f"with -d: `{elsewhere_command(sys.argv[1:], workflow.basedir)}`.")
else:
    _UNREADABLE = yaml_problem("config.yaml") or twice_in(workflow.overwrite_configfiles or [])
if _UNREADABLE:
    print(_UNREADABLE, file=sys.stderr, flush=True)
    raise SystemExit(1)
