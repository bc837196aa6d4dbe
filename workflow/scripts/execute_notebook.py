"""Execute a paper's notebook on this run's results and export it as HTML without code cells
(reluinit.report.reports.execute: papermill and nbconvert in this one process)."""

from reluinit.pipeline import jobs
from reluinit.report import reports

sm = snakemake  # noqa: F821 - injected by Snakemake
log = jobs.start(sm.log[0], threads=None)
jobs.verified(sm.input)  # the tables it shows: whole, or the job stops naming the damaged one
log.info("executing %s at the %s scale on %s", sm.input.notebook, sm.params.scale, sm.params.results)
reports.execute(sm.input.notebook, sm.output.ipynb, sm.output.html, scale=sm.params.scale, results=str(sm.params.results))
log.info("wrote %s and %s", sm.output.ipynb, sm.output.html)
