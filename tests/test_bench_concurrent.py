"""dod.bench.concurrent (the allocator article's scaling benchmark) runs, returns every
block, and reports L1d misses only when it could count them."""
import pytest

from dod.bench import concurrent


@pytest.mark.parametrize("pattern", ["random", "single"])
def test_scaling_rows_are_complete_and_honest(pattern):
    res = concurrent.scaling(pattern, threads=(1, 2), iterations=3000, repeat=1)
    assert set(res) == set(concurrent.KERNELS)
    for name, by_n in res.items():
        assert by_n[1]["scaling"] == 1.0 and by_n[2]["ns"] > 0
        assert (by_n[2]["retries"] is None) == (not name.startswith(("lfpool", "segfit")))
        for row in by_n.values():
            # a number only when the counter was read; otherwise the reason
            assert (row["l1d"] is None) == bool(row["l1d_why"])
            assert row["l1d"] is None or row["l1d"] >= 0


def test_metadata_of_the_caches_is_the_shared_allocators_plus_slack():
    ov = concurrent.overhead(20_000, 64)
    assert set(ov) == set(concurrent.KERNELS)
    for kind in ("lfpool", "segfit"):
        shared, cached = ov[f"{kind}_shared"][0], ov[f"{kind}_cached"][0]
        assert 0 <= shared <= cached <= shared + 64 * 64 / 20_000     # one cache: at most 64 blocks more


def test_threads_option_sets_the_thread_counts(monkeypatch):
    import os
    from dod.bench import __main__ as cli, thread_counts

    monkeypatch.setenv("DOD_BENCH_THREADS", "1")      # restored after the test
    monkeypatch.setattr(cli, "SECTIONS", [])          # run no section: only the option matters
    cli.main(["--only", "--threads", "1,2,4"])
    assert os.environ["DOD_BENCH_THREADS"] == "1,2,4" and thread_counts() == [1, 2, 4]


def test_random_sizes_hold_the_word_every_kernel_writes():
    # _run writes one uint64 into every block: a smaller request overflowed
    # (the sanitize build caught a 7-byte malloc)
    from dod.bench._concurrent_kernels import random_sizes

    sizes = random_sizes()
    # within the random pattern's pool block (1 KiB), every request at least one word
    assert len(sizes) == 256 and min(sizes) >= 8 and max(sizes) <= 1024
    assert max(sizes) > 768                   # the top classes are drawn too
    assert len(set(sizes)) > 100          # spread over the classes, not clamped flat
