from typing import Any, Callable, Literal, Protocol

from dod.arena import Arena

class Clock(Protocol):
    def now(self) -> int: ...
    def sleep_until(self, t: int) -> None: ...

def monotonic_ns() -> int: ...

class Loop:
    step: Callable[[], Any]
    rate: float
    scratch: Arena
    running: bool
    ticks: int
    misses: int
    skipped: int
    longest_miss_run: int
    late_max_ns: int
    def __init__(
        self,
        step: Callable[[], Any],
        rate: float = 50.0,
        *,
        scratch: Arena | None = None,
        scratch_bytes: int = 1 << 20,
        spin: float = 0.0,
        overrun: Literal["skip", "catch_up"] = "skip",
        gc: Literal["freeze", "disable"] | None = "freeze",
        check_scratch: bool = True,
        numpy_scratch: bool = False,
        clock: Clock | None = None,
        lock_memory: bool | Literal["onfault"] = False,
        cpu: int | None = None,
        realtime_priority: int | None = None,
        strict: bool = True,
    ) -> None: ...
    @property
    def numpy_scratch(self) -> bool: ...
    @property
    def numpy_stats(self) -> dict[str, int] | None: ...
    @property
    def realtime(self) -> dict[str, Any]: ...
    @property
    def period(self) -> float: ...
    @property
    def tick(self) -> int: ...
    def stop(self) -> None: ...
    def run(self, ticks: int | None = None, *, duration: float | None = None) -> int: ...
    def percentile(self, q: float) -> float: ...
    def histogram(self) -> tuple[list[int], list[int]]: ...
    def reset_stats(self) -> None: ...
    def stats(self) -> dict[str, float]: ...
