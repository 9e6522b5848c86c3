"""Transparent huge pages from the pages resource (dod.resource.set_huge_pages):
random reads over 128 MiB of a PageSource's pages, mapped with and without
the hint, in the same run.

The reads miss the caches either way; what the hint changes is the TLB: one
entry per 2 MiB instead of per 4 KiB, so a random read walks the page table
far less often. Where the system's THP mode is "never" both rows are the
same; in "always" mode both have huge pages. Skipped (NotImplementedError) on
commits without the switch.
"""
import numpy as np

try:
    from dod import resource
    from dod.pages import PageSource
    HAVE = hasattr(resource, "set_huge_pages")
except ImportError:
    HAVE = False

NBYTES = 128 << 20
READS = 1 << 21


def _reads(hint):
    """(array on fresh pages, faulted in; random indices into it)."""
    if not HAVE:
        raise NotImplementedError("dod.resource.set_huge_pages not in this commit")
    was = resource.set_huge_pages(hint)
    try:
        a = PageSource().empty(NBYTES // 8, np.int64)
    finally:
        resource.set_huge_pages(was)
    a[:] = 1                                    # fault every page in before timing
    idx = np.random.default_rng(0).integers(0, a.size, READS)
    return a, idx


class HugePages:
    params = [False, True]
    param_names = ["huge_pages"]

    def setup(self, hint):
        self.a, self.idx = _reads(hint)

    def time_random_reads_128MiB(self, hint):
        self.a.take(self.idx).sum()


class HugePagesGain:
    """Random-read time without the hint over time with it (> 1: the hint helps)."""

    def setup(self):
        self.runs = {hint: _reads(hint) for hint in (False, True)}

    def _ns(self, hint, repeat=5):
        import time
        a, idx = self.runs[hint]
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter_ns()
            a.take(idx).sum()
            best = min(best, time.perf_counter_ns() - t0)
        return best / idx.size

    def track_ns_per_read_without_over_with(self):
        return self._ns(False) / self._ns(True)
    track_ns_per_read_without_over_with.unit = "x"
