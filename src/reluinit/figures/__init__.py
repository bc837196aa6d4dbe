"""The experiments' figures and summaries: each reads a tidy table and draws it, or reduces it to
the numbers a reader compares with the paper.

``reluinit.figures.<module>`` holds the figure and summary functions of
``reluinit.experiments.<module>`` (the catalogue looks them up there). They import pandas,
matplotlib and seaborn, never torch: a figure job starts in about half the time a measurement
job does, and most quick jobs are mostly start-up. Plotting (and its file backend) comes first."""

from ..report import plotting  # noqa: F401 - sets matplotlib's file backend before any figure module draws
