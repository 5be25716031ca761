"""petrov.common: the small utilities every part of petrov shares.

- [`registry`][]: ``Registry``, named tables (mixers, models, solvers, recipes) with typo hints;
- [`config`][]: strict dataclass configs (``from_dict``/``asdict``: unknown keys are errors);
- [`files`][]: atomic writes (temp file, fsync, rename) for every file petrov writes;
- [`disk_space`][]: free space, and ``NoSpace``, the error of a full disk, a quota or the file-size limit;
- [`os_errors`][]: an operating-system error in one line naming the file or stream, the cause and what to do;
- [`path_checks`][]: paths checked before the work (writable folders, room for a file, inputs that exist);
- [`locks`][]: locks between processes (one writer per target, one manifest update at a time);
- [`outputs`][]: output folders, the rule every command follows when it writes into one;
- [`dtypes`][]: ``upcast``, the one rule for computing sums of 16-bit tensors in float32;
- [`allocator`][]: ``retain_freed_memory``, glibc malloc set to reuse what training steps free;
- [`host`][]: ``to_numpy``, the one way a tensor that may live on a device comes back to the host;
- [`version`][]: the installed petrov version;
- [`shipped`][]: the operators shipped inside petrov by name (``pretrained:NAME`` -> their folder);
- [`progress`][]: ``progress_bar``, the one tqdm factory (bars only on a terminal or in a notebook).
"""
