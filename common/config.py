"""Strict dataclass configs: an unknown or mistyped key is an error, never silently ignored.

``from_dict(Cls, mapping)`` builds a dataclass from a plain dict (e.g. parsed TOML or a saved
checkpoint), naming every unknown key and the closest valid one, and checking value types for the
simple annotations used in configs (bool, int, float, str, tuples/lists of those, Optional).
``asdict`` gives the plain dict back (tuples become lists so it round-trips through TOML/JSON).
"""
from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any, Mapping, TypeVar

C = TypeVar("C")


def _check_type(value: Any, annotation: Any, where: str) -> Any:
    """Return ``value`` coerced to ``annotation`` where lossless (int -> float, list -> tuple)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_type(value, arg, where)
            except TypeError as err:
                errors.append(str(err))
        if len(errors) > 1:  # e.g. Literal["ffn"] | bool: every accepted form named, not the first's alone
            accepted = " or ".join(_accepted(arg) for arg in args if arg is not type(None))
            raise TypeError(f"{where}: expected {accepted}, got {type(value).__name__} {value!r}")
        raise TypeError(errors[0] if errors else f"{where}: invalid value {value!r}")
    if origin is typing.Literal:
        if value not in args:
            raise TypeError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where}: expected a list, got {type(value).__name__} {value!r}")
        item_type = args[0] if args else Any
        items = [_check_type(v, item_type, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or annotation is dict:
        if not isinstance(value, Mapping):
            raise TypeError(f"{where}: expected a table/dict, got {type(value).__name__}")
        return dict(value)
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{where}: expected a number, got {type(value).__name__} {value!r}")
        return float(value)
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where}: expected an integer, got {type(value).__name__} {value!r}")
        return value
    if annotation in (bool, str):
        if not isinstance(value, annotation):
            raise TypeError(
                f"{where}: expected {annotation.__name__}, got {type(value).__name__} {value!r}"
            )
        return value
    return value


def _accepted(annotation: Any) -> str:
    """What a value of ``annotation`` is, in an error's words (``one of ['ffn']``, ``bool``)."""
    if typing.get_origin(annotation) is typing.Literal:
        return f"one of {list(typing.get_args(annotation))}"
    return getattr(annotation, "__name__", str(annotation))


def _optional(annotation: Any) -> bool:
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return union and type(None) in typing.get_args(annotation)


def _is_table(annotation: Any) -> bool:
    """Whether ``annotation`` is a dataclass (a nested table), or ``Optional`` of one."""
    if _optional(annotation):
        return any(dataclasses.is_dataclass(a) for a in typing.get_args(annotation))
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def from_dict(cls: type[C], mapping: Mapping[str, Any], context: str | None = None) -> C:
    """Build dataclass ``cls`` from ``mapping``; unknown keys and wrong types raise ``ValueError``.

    Nested dataclass fields accept nested mappings.
    """
    context = context or cls.__name__
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in mapping if k not in fields]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ValueError(
            f"{context}: unknown key(s) {', '.join(hints)}; valid keys: {', '.join(fields)}"
        )
    hints_map = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in mapping.items():
        annotation = hints_map.get(key, Any)
        if dataclasses.is_dataclass(annotation) and isinstance(value, Mapping):
            kwargs[key] = from_dict(annotation, value, f"{context}.{key}")
            continue
        if _is_table(annotation) and not isinstance(value, Mapping) and not (value is None and _optional(annotation)):
            raise ValueError(f"{context}.{key}: expected a table, got {type(value).__name__} {value!r}")
        try:
            kwargs[key] = _check_type(value, annotation, f"{context}.{key}")
        except TypeError as err:
            raise ValueError(str(err)) from None
    return cls(**kwargs)


def asdict(config: Any) -> dict[str, Any]:
    """Plain-dict form of a dataclass config (tuples -> lists), safe for JSON/TOML/torch.save."""

    def plain(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    return {k: plain(v) for k, v in dataclasses.asdict(config).items()}


def check_positive(config: Any, *names: str) -> None:
    """``ValueError`` naming the first of ``names`` whose value in ``config`` is not an integer >= 1
    (None is allowed: an optional field left to its default)."""
    for name in names:
        value = getattr(config, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{type(config).__name__}.{name} must be an integer >= 1, got {value!r}")
