"""Named registries: one decorator adds a mixer or a model, nothing else needs editing.

    MIXERS = Registry("mixer")

    @MIXERS.register("galerkin")
    class GalerkinMixer(nn.Module): ...

    MIXERS.get("galerkin")      # -> the class
    MIXERS.get("galrkin")       # KeyError: unknown mixer 'galrkin'; registered: ... (did you mean 'galerkin'?)
"""
from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object table with helpful errors for unknown names."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering ``obj`` under ``name`` (a duplicate name is an error)."""

        def add(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = obj
            return obj

        return add

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(self.unknown_message(name)) from None

    def unknown_message(self, name: object) -> str:
        msg = f"unknown {self.kind} {name!r}; registered: {', '.join(self.names())}"
        close = difflib.get_close_matches(str(name), self.names(), n=1)
        return msg + (f" (did you mean {close[0]!r}?)" if close else "")

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
