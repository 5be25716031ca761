"""Time-series file formats petrov reads by name (``petrov import --from NAME FILE``): a registry of readers,
each ``reader(path, grid=None) -> SeriesSource`` (``time_series``), and ``import_series_file``.

Registered: ``pdebench`` (``pdebench``), ``the-well`` (``the_well``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from ..common.outputs import check_outputs, output_file
from ..common.registry import Registry
from .pdebench import pdebench_series
from .the_well import well_series
from .time_series import SeriesSource, write_time_series

SERIES_FORMATS: Registry[Callable[..., SeriesSource]] = Registry("time-series format (--from)")
SERIES_FORMATS.register("pdebench")(pdebench_series)
SERIES_FORMATS.register("the-well")(well_series)


def rename_fields(series: SeriesSource, fields: Sequence[str]) -> None:
    """Give the fields of ``series`` the names ``fields`` (one per field, in order)."""
    old = series.fields
    if len(fields) != len(old):
        raise ValueError(f"{series.file}: fields: {len(fields)} names ({', '.join(fields)}) for the file's {len(old)} "
                         f"fields ({', '.join(old)}); give one name per field")
    names = iter(fields)
    for part in series.parts:
        part.names = [next(names) for _ in part.names]


def import_series_file(output: str | os.PathLike, source: str | os.PathLike, *, format: str,
                       grid: str | Sequence[str] | None = None, fields: Sequence[str] | None = None,
                       overwrite: bool = False, chunk_size: int | None = None, description: str | None = None,
                       progress: bool = False) -> Path:
    """Write the time series of the file ``source`` in ``format`` (a name in ``SERIES_FORMATS``) into the petrov
    file ``output`` of kind ``time-series``. ``grid`` overrides the grid kind of every axis (or of each) where
    the file does not record it or records it otherwise; ``fields`` renames the fields. Returns ``Path(output)``."""
    reader = SERIES_FORMATS.get(format)
    output = output_file(output)
    check_outputs(output.parent, "import", [output.name], overwrite=overwrite, scope="file", flag="-o")
    series = reader(Path(source), grid=grid)
    try:
        if fields is not None:
            rename_fields(series, list(fields))
        return write_time_series(output, series, overwrite=overwrite, chunk_size=chunk_size, description=description,
                                 progress=progress)
    finally:
        series.close()


__all__ = ["SERIES_FORMATS", "import_series_file", "rename_fields"]
