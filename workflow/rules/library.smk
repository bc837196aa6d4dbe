# Read before the config: the library on the path, and config.yaml readable as YAML (Snakemake's
# own message for a file it cannot parse names neither the file nor the line).
import sys
from pathlib import Path

# The science lives in the importable package under src/ (reluinit.pipeline.workflow_env says how
# jobs find it).
_SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, _SRC)

from reluinit.pipeline import workflow_env  # noqa: E402
from reluinit.pipeline.config import yaml_problem  # noqa: E402

workflow_env.export(_SRC)

_UNREADABLE = yaml_problem("config.yaml")
if _UNREADABLE:
    print(_UNREADABLE, file=sys.stderr, flush=True)
    raise SystemExit(1)
