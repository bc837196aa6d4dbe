"""Reproductions of five papers on deep ReLU networks at initialization.

The library does the science (sampling networks, measuring them, the papers' bounds);
the Snakemake workflow under ``workflow/`` only parses settings, calls it and writes files.
"""

__version__ = "0.1.0"
