"""Tools beside the pipeline: benchmarks of the hot paths and the float32 precision check."""
