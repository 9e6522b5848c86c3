from typing import Any, Literal

CPU_SETSIZE: int

def locked_kib() -> int: ...

class Realtime:
    lock_memory: bool | Literal["onfault"]
    cpu: int | None
    priority: int | None
    strict: bool
    active: dict[str, Any]
    refused: dict[str, str]
    def __init__(
        self,
        lock_memory: bool | Literal["onfault"] = False,
        cpu: int | None = None,
        priority: int | None = None,
        *,
        strict: bool = True,
    ) -> None: ...
    @property
    def applied(self) -> bool: ...
    @property
    def requested(self) -> bool: ...
    def apply(self) -> dict[str, Any]: ...
    def undo(self) -> None: ...
    def report(self) -> dict[str, Any]: ...
