"""petrov.export: trained operators written as files that run without petrov (ONNX, ``torch.export``).

- [`api`][]: ``export_operator`` (what ``petrov export`` does): trace, write, check against PyTorch;
- [`sources`][]: which trained operator a source names (a run folder);
- [`graph`][]: the traced module, raw inputs to raw outputs; [`statistics`][]: its normalisers;
- [`tracing`][]: ``torch.export`` with a dynamic batch and grid size, and which models take a dynamic grid;
- [`formats`][]: the file formats (``onnx``, ``torch-export``).
"""
from .api import TOLERANCE, ExportResult, export_operator
from .formats import FORMATS, ExportFormat, export_format, register_format
from .graph import InferenceGraph
from .sources import Source, load_source
from .tracing import FIXED_RESOLUTION

__all__ = ["FIXED_RESOLUTION", "FORMATS", "TOLERANCE", "ExportFormat", "ExportResult", "InferenceGraph", "Source",
           "export_format", "export_operator", "load_source", "register_format"]
