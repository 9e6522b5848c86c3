from typing import Any

class Resource:
    @property
    def owner(self) -> Any: ...
    @property
    def name(self) -> str: ...
    def capsule(self) -> Any: ...

pages: Resource
malloc: Resource
