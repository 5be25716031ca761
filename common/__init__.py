"""petrov.common: the small utilities every part of petrov shares.

- [`registry`][]: ``Registry``, named tables (mixers, models, solvers, recipes) with typo hints;
- [`config`][]: strict dataclass configs (``from_dict``/``asdict``: unknown keys are errors);
- [`files`][]: atomic writes (temp file, fsync, rename) for every file petrov writes;
- [`dtypes`][]: ``upcast``, the one rule for computing sums of 16-bit tensors in float32;
- [`allocator`][]: ``retain_freed_memory``, glibc malloc set to reuse what training steps free;
- [`host`][]: ``to_numpy``, the one way a tensor that may live on a device comes back to the host;
- [`version`][]: the installed petrov version;
- [`shipped`][]: the operators shipped inside petrov by name (``pretrained:NAME`` -> their folder);
- [`progress`][]: ``progress_bar``, the one tqdm factory (bars only on a terminal or in a notebook);
- [`moved`][]: the module paths of petrov 0.1 that moved, importable until petrov 0.3.0.
"""
