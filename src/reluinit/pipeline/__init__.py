"""The pipeline's machinery: the catalogue of experiments, settings and their schema, paths,
the plan of jobs and their resources, job helpers, the smoke subset, and code fingerprints.
It calls the science (``reluinit.<module>``); the science never imports it."""
