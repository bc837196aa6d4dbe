"""Reporting: claims judged on result tables, notebooks' helpers, the committed reference
tree, and the house style of figures. It reads results; the science never imports it."""
