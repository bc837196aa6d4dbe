"""This process's own peak resident memory."""

from __future__ import annotations

import resource
import sys


def peak_rss_bytes() -> int:
    """The most host memory this process has held, in bytes.

    On Linux it reads ``VmHWM`` from ``/proc/self/status``, the high-water mark of the process's
    own address space. ``getrusage``'s ``ru_maxrss`` survives ``execve``: a child started by
    ``subprocess`` (fork or vfork, then exec) reports its parent's peak when that was larger, so a
    memory bound checked in a child of a 5 GB test worker read 5 GB whatever the child did."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere
