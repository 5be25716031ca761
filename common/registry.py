"""Named registries: one decorator adds a mixer or a model, nothing else needs editing.

    MIXERS = Registry("mixer")

    @MIXERS.register("galerkin")
    class GalerkinMixer(nn.Module): ...

    MIXERS.get("galerkin")      # -> the class
    MIXERS.get("galrkin")       # KeyError: unknown mixer 'galrkin'; registered: ... (did you mean 'galerkin'?)

Other packages add entries through entry points: a registry made with ``entry_point_group="petrov.models"``
loads every entry point of that group (``importlib.metadata.entry_points``) once, the first time it is
read; loading one imports its module, whose ``register`` decorators add the entries. An entry point that
fails to load is a warning naming it (petrov stays usable), and asking for a name it should have provided
repeats the reason. A user's package declares, e.g. in its pyproject.toml:

    [project.entry-points."petrov.models"]
    my_model = "my_package.models"
"""
from __future__ import annotations

import difflib
import warnings
from importlib import metadata
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object table with helpful errors for unknown names."""

    def __init__(self, kind: str, entry_point_group: str | None = None):
        self.kind = kind
        self._entries: dict[str, T] = {}
        self.entry_point_group = entry_point_group
        self._plugins_loaded = entry_point_group is None
        self.plugin_errors: dict[str, str] = {}  # entry point name -> why it failed to load

    def _load_plugins(self) -> None:
        """Import the entry points of ``entry_point_group`` (once; their modules register entries)."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True  # before loading: a plugin's own lookups must not recurse
        for ep in metadata.entry_points(group=self.entry_point_group):
            try:
                ep.load()
            except Exception as err:  # any error in someone else's package: report, keep going
                dist = getattr(getattr(ep, "dist", None), "name", None) or "an installed package"
                why = f"{type(err).__name__}: {err}"
                self.plugin_errors[ep.name] = why
                warnings.warn(
                    f"petrov: the {self.entry_point_group} entry point {ep.name!r} = {ep.value!r} of {dist} "
                    f"failed to load ({why}); its {self.kind}s are unavailable",
                    RuntimeWarning,
                    stacklevel=3,
                )

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering ``obj`` under ``name`` (a duplicate name is an error)."""

        def add(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = obj
            return obj

        return add

    def get(self, name: str) -> T:
        self._load_plugins()
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(self.unknown_message(name)) from None

    def unknown_message(self, name: object) -> str:
        msg = f"unknown {self.kind} {name!r}; registered: {', '.join(self.names())}"
        close = difflib.get_close_matches(str(name), self.names(), n=1)
        failed = "".join(f"; entry point {ep!r} failed to load ({why})" for ep, why in self.plugin_errors.items())
        return msg + (f" (did you mean {close[0]!r}?)" if close else "") + failed

    def names(self) -> list[str]:
        self._load_plugins()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self._load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
