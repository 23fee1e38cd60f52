"""glibc's allocator told to keep freed memory: big tensors are not page-faulted afresh on every
forward (an accelerator of every large-tree computation; it changes no value)."""

import ctypes
import sys


def retain_freed_memory() -> bool:
    """Process-wide (glibc only): serve large tensors from the malloc heap and keep freed memory
    there instead of returning it to the OS. Returns whether the setting was applied. Every
    `xlvin` command calls it; a library user opts in by calling it.

    glibc hands every allocation above 32 MiB to mmap and unmaps it on free, so every forward of a
    big tree re-faults its activations page by page (the kernel zeroes each page); on the (8, 4)
    maze tree this was a large part of the forward and backward time (benchmarks/notes.md). The
    price: the process keeps its peak memory mapped. It is what MALLOC_MMAP_MAX_=0
    MALLOC_TRIM_THRESHOLD_=<large> do when set before the process starts.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_max = -1, -4
        # mallopt's int -1 is size_t's max as a trim threshold: never trim
        return bool(libc.mallopt(m_mmap_max, 0)) and bool(libc.mallopt(m_trim_threshold, -1))
    except (OSError, AttributeError):
        return False
