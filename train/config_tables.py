"""The tables of a training config, as strict dataclasses: ``[data]`` (``DataConfig``, with
``[data.generate]``: ``GenerateConfig``), ``[model]`` (``ModelConfig``), ``[optim]`` (``OptimConfig``),
``[loss]`` (``LossConfig``), ``[run]`` (``RunConfig``), gathered by ``TrainConfig``.

Each class's docstring says what every key means (the documentation site's config page is drawn from
them); reading, overriding and checking a whole config is [`petrov.train.config`][].
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .distributed import DEFAULT_TIMEOUT_MINUTES


@dataclass
class GenerateConfig:
    """How to create ``data.path`` if it does not exist (``petrov.datasets.generate_dataset``):
    the ``[data.generate]`` table.

    - ``kind``: the dataset kind (``petrov generate --help`` lists them: ``burgers``, ``darcy``,
      ``burgers-trajectory``, ``darcy-mesh``, ...).
    - ``n_samples``: samples to generate.
    - ``resolution``: the native grid the samples are solved on (``None``: the kind's default).
    - ``seed``: the random seed of the samples (the same seed gives the same file).
    - ``options``: the kind's own parameters (e.g. ``{ time_steps = 20 }`` for trajectories).
    """

    kind: str
    n_samples: int
    resolution: int | None = None
    seed: int = 0
    options: dict = field(default_factory=dict)


@dataclass
class DataConfig:
    """Which file, which samples, which resolutions (grid files) or mesh levels (mesh files): the
    ``[data]`` table.

    Splits of the file's N samples (in file order): train = ``[0, n_train)``,
    val = ``[n_train, n_train + n_val)`` (model selection), test = ``[N − n_test, N)`` (only ever
    evaluated).  Normalisers are fitted on the train indices at the native resolution.

    - ``path``: the dataset file (relative to the working directory).
    - ``train_resolution``: grid files: the resolution to train at (``None``: the file's native one); a pair
      ``[n_x, n_y]``: points per axis of a rectangular 2-D grid (an int and a pair likewise in ``eval_resolutions``).
    - ``eval_resolutions``: grid files: resolutions the test split is evaluated at after training
      (``[]``: the training resolution).
    - ``level``: mesh files: the mesh level to train on (e.g. ``"level0"``).
    - ``eval_levels``: mesh files: the levels the test split is evaluated on (``[]``: every level).
    - ``lazy``: read the samples of each batch from the file instead of loading the split into memory
      (large files); under torchrun splits are always read so, each process reading the samples of its
      own batches.
    - ``n_train``, ``n_val``, ``n_test``: the sizes of the training, validation and test splits.
    - ``kind``: read the file as another kind of its family (a ``darcy`` file as ``darcy-inverse``:
      u in, a out; ``None``: the file's kind).
    - ``noise``: inverse problem: ``noise · N(0, 1)`` added to the normalised input (``None``: the
      level recorded in the file, 0 if none).
    - ``coarse_resolution``: inverse problem: the target average-pooled to this grid (``None``: the
      file's).
    - ``noise_seed``: the noise of sample i is fixed by ``(noise_seed, i)``, the same in every epoch
      and in evaluation.
    - ``normalize_x``, ``normalize_y``: normalise the input, the target (Gaussian normalisers fitted on
      the training split).
    - ``normalizer``: ``"pointwise"``: a mean and std per grid point and channel; ``"global"``: one mean and
      std for all points and channels (trajectories of a translation-invariant flow, whose point-wise
      statistics are sampling noise; every state then in the same units, as a stepping model wants them).
    - ``history``, ``first_state``, ``states``: trajectory files (states stored as the channels of ``y``):
      the window ``y[..., first_state : first_state + states]`` is the target (``states`` None: to the last
      state) and its first ``history`` states the input ``x``, which a marching model with ``history``
      given states and ``time_steps = states - history`` maps to the whole window.  FNO's Navier–Stokes
      benchmark (``w0`` and 20 states stored, the first 10 after ``w0`` in, the next 10 out):
      ``first_state = 1``, ``history = 10``.  A trajectory's normalisers are fitted on the window, the
      input's being the target's first ``history`` states, so a state has the same units in and out.
    - ``normalizer_grid``: mesh files: the normalisers' mean and std are functions on the node grid
      of ``[0, 1]²`` with this many nodes per axis (hat averages over the training samples,
      interpolated to each node); ``None``: as fine as the training meshes (``1 + round(1/h)``, ``h``
      the median node spacing, the square root of a node's quadrature weight). On a uniform grid
      stored as a mesh that is the grid itself, and the normalisers are the grid's point-wise ones.
    - ``augment``: ``"square"``: each training sample moved by a random symmetry of the unit square in
      each epoch (quarter turns and reflections); ``"diagonal"``: reflected across the diagonal ``x = y``
      or not (the exact one where ``"square"`` is not: targets pooled by an even kernel, as
      ``darcy-inverse-gpu``'s); ``"periodic"``: shifted by a random whole number of
      nodes along its periodic grid; ``"periodic-odd"``: shifted, or shifted and oddly reflected
      (``u(x) → −u(−x)``); ``"none"``: as they are.  ``petrov.train.augmentation`` says when a problem
      allows which: petrov's Darcy data on grids and meshes the square, Burgers both periodic groups.
    - ``generate``: how to generate ``path`` when it does not exist (the ``[data.generate]`` table,
      [`GenerateConfig`][]; ``None``: the file must exist).
    """

    path: str
    train_resolution: int | list[int] | None = None  # grid files; None: native; [n_x, n_y]: a rectangular grid
    eval_resolutions: list[int | list[int]] = field(default_factory=list)  # test after training; [] = train res
    level: str | None = None  # mesh files: the mesh level to train on (e.g. "level0")
    eval_levels: list[str] = field(default_factory=list)  # mesh files: test after training; [] = every level
    lazy: bool = False  # read samples per batch (large files; always under torchrun)
    n_train: int = 1000
    n_val: int = 100
    n_test: int = 100
    kind: str | None = None  # read the file as another kind of its family (darcy -> darcy-inverse)
    noise: float | None = None  # inverse problem: noise·N(0,1) added to the normalised input;
    #                             None: the level recorded in the file (0 if none)
    coarse_resolution: int | None = None  # inverse problem: target pooled to this grid (None: file's)
    noise_seed: int = 0  # the noise of sample i is fixed by (noise_seed, i) in train, val and test
    normalize_x: bool = True
    normalize_y: bool = True
    normalizer: Literal["pointwise", "global"] = "pointwise"  # statistics per grid point, or one mean and std
    history: int = 1  # trajectories: the states the model is given (x), the first of the window
    first_state: int = 0  # trajectories: the window starts at this stored state
    states: int | None = None  # trajectories: the window's length (None: to the last stored state)
    normalizer_grid: int | None = None  # mesh files: nodes per axis of the normalisers' grid; None: the meshes'
    augment: Literal["none", "square", "diagonal", "periodic", "periodic-odd"] = "none"  # moved by a symmetry group
    generate: GenerateConfig | None = None


@dataclass
class ModelConfig:
    """A registered model name and its options: the ``[model]`` table.

    - ``name``: the model (``petrov models`` lists them).
    - ``options``: the model's config fields (the ``[model.options]`` table; ``petrov models NAME``
      lists them with their defaults; an unknown one is an error).
    """

    name: str
    options: dict = field(default_factory=dict)


@dataclass
class OptimConfig:
    """Adam/AdamW with a OneCycle schedule stepped once per (global) batch: the ``[optim]`` table.

    - ``optimizer``: ``"adam"`` or ``"adamw"`` (decoupled weight decay).
    - ``lr``: the maximum learning rate of the OneCycle schedule.
    - ``weight_decay``: weight decay (L2 penalty for Adam, decoupled for AdamW).
    - ``epochs``: passes over the training split; a fraction ends the last pass early (``2.5``: two
      passes and the first half of the batches of a third; a run planned to a time budget ends so).
    - ``batch_size``: samples per optimizer step (the global batch: split evenly over the processes
      of a distributed run).
    - ``grad_clip``: the largest global gradient norm; larger gradients are scaled down (0: no
      clipping).
    - ``pct_start``: the share of the steps over which the learning rate rises to ``lr``.
    - ``div_factor``: the initial learning rate is ``lr / div_factor``.
    - ``final_div_factor``: the final learning rate is the initial one ``/ final_div_factor``.
    - ``min_warmup_steps``: the rise lasts at least this many steps (short runs).
    """

    optimizer: Literal["adam", "adamw"] = "adam"
    lr: float = 1e-3  # OneCycle maximum
    weight_decay: float = 0.0
    epochs: int | float = 100
    batch_size: int = 8  # global batch: split evenly over the processes of a distributed run
    grad_clip: float = 1.0  # max global gradient norm; 0 disables clipping
    pct_start: float = 0.3
    div_factor: float = 1e4  # initial lr = lr / div_factor
    final_div_factor: float = 1e4  # final lr = initial lr / final_div_factor
    min_warmup_steps: int = 0  # warm up over at least this many batches (short runs)


@dataclass
class LossConfig:
    """The training loss ``relL2 + h1_weight · relH1`` ([`petrov.train.losses`][]): the ``[loss]`` table.

    - ``h1_weight``: the weight of the relative H¹ seminorm term (derivatives by central differences).
    - ``mode``: the training mode ([`petrov.train.rollout`][]): ``"direct"`` (one prediction per
      sample); for marching models ``"teacher_forcing"`` (every step from the true previous state),
      ``"pushforward"`` (from the model's own detached one-step predictions) or ``"rollout"`` (the
      loss through every step of a free rollout).
    - ``trajectory_metric``: marching models: what validation selects on and the test reports, of a free
      rollout: ``"state_mean"``, the mean over the predicted states of their relative L², or
      ``"space_time"``, the relative L² of the whole predicted space-time block (the FNO paper's
      Navier–Stokes metric).
    """

    h1_weight: float = 0.0
    mode: str = "direct"
    trajectory_metric: Literal["state_mean", "space_time"] = "state_mean"


@dataclass
class RunConfig:
    """How a run executes: the ``[run]`` table.

    - ``seed``: seeds the initialization, the data order and dropout.
    - ``device``: ``"auto"`` (CUDA when torch sees a GPU), ``"cpu"`` or ``"cuda"``.
    - ``amp``: mixed precision for the model's forward in training: bfloat16 autocast on the CPU and
      on CUDA (float16 with gradient scaling on GPUs without bfloat16); weights, loss, optimizer and
      every evaluation stay float32.
    - ``compile``: ``torch.compile`` of the model in training and validation: ``"off"``, ``"default"``,
      ``"cuda-graphs"`` (``mode="reduce-overhead"``: each step replayed as captured CUDA graphs, the
      last partial batch padded with zero-weight copies, a mesh batch to its split's largest mesh);
      ``"auto"``: eager on the CPU, for meshes and
      under torchrun, CUDA graphs on one CUDA device for grid data ([`compilation`][petrov.train.compilation]).
      A marching model's validation (free rollouts) runs eager under every setting.
    - ``matmul_precision``: ``torch.set_float32_matmul_precision`` during the run: ``"highest"``
      (float32), ``"high"`` (TF32 where the GPU has it), ``"medium"`` (bfloat16 products); ``"auto"``:
      ``"highest"`` ([`precision`][petrov.train.precision]).
    - ``num_workers``: data-loader worker processes (0: load in the training process).
    - ``threads``: ``torch.set_num_threads`` per process (``None``: torch's default).
    - ``time_budget_minutes``: a wall-clock budget for the epochs (``None``: none).  The run stops
      cleanly before an epoch that would end past it (at the pace of the epochs so far); when the steps
      left no longer fit, the learning-rate schedule is shortened to those that do (whole epochs, the
      last one ending early where a whole one does not fit), so the run ends at the end of its schedule
      (``Trainer.fit_schedule_to``; a run whose epochs were planned from a probe, as the benchmarks
      plan them, is also lengthened when its epochs turn out faster than the probe said).
    - ``fill_budget``: with ``time_budget_minutes``, the epochs are planned to fill the budget instead of
      taken from ``optim.epochs`` (which then caps them): a timing probe of this run (its training step,
      validation and checkpoints, once warm: compilation and CUDA graph capture excluded) sets the
      epochs whose whole schedule takes ``BUDGET_FRACTION`` (95%) of the budget, a fractional last
      epoch included ([`planning`][petrov.train.planning]).  The same preset then trains for the same
      minutes on any device; the planned epochs are written to the run's ``config.json``.
      ``petrov train --budget-minutes M`` sets both.
    - ``tensorboard``: also log to TensorBoard (``pip install ".[tensorboard]"``).
    - ``progress``: progress bars on a terminal (the first process only).
    - ``eval_batch_size``: the batch of validation and test passes (``None``: the training batch).
    - ``init_from``: a finished run whose best weights this run starts from (same model name and
      options), with this config's fresh optimizer and schedule (``petrov train --continue``).
    - ``collective_timeout_minutes``: a distributed run: how long a process waits in a collective for the
      others before the run stops with a line naming what happened (torch's own defaults: 30 minutes
      for gloo, 10 for NCCL; [`failures`][petrov.train.failures]).
    """

    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # mixed precision for the model's forward in training: bfloat16 on the CPU and on CUDA (float16
    # + gradient scaling on GPUs without bfloat16); weights, loss, optimizer and evaluation float32
    amp: bool = False
    # torch.compile of the model in training and validation: "off", "default", "cuda-graphs" (torch.compile's
    # mode="reduce-overhead": every step one captured CUDA graph); "auto": eager on the CPU and in a distributed
    # run, CUDA graphs on one CUDA device for grid data (petrov.train.compilation says why)
    compile: Literal["auto", "off", "default", "cuda-graphs"] = "auto"
    # torch.set_float32_matmul_precision during the run: "highest" (float32), "high" (TF32 on GPUs that have
    # it), "medium" (bfloat16 products); "auto": "highest" (petrov.train.precision says why)
    matmul_precision: Literal["auto", "highest", "high", "medium"] = "auto"
    num_workers: int = 0
    threads: int | None = None  # torch.set_num_threads per process; None: torch's default
    time_budget_minutes: float | None = None  # stop cleanly before the epoch that would pass it
    # plan the epochs from a timing probe to fill time_budget_minutes (optim.epochs: at most)
    fill_budget: bool = False
    tensorboard: bool = False
    progress: bool = True  # tqdm bars (rank 0)
    eval_batch_size: int | None = None  # None: the training batch size
    # continue a finished run: start from the weights of that run's best.pt (same model name and
    # options), with this config's fresh optimizer and schedule
    init_from: str | None = None
    # a distributed run: how long a process waits in a collective for the others before the run stops with
    # an error naming what happened (torch's own defaults: 30 minutes for gloo, 10 for NCCL)
    collective_timeout_minutes: float = DEFAULT_TIMEOUT_MINUTES


@dataclass
class TrainConfig:
    """A whole training config: one field per table of the TOML file.

    - ``data``: the ``[data]`` table ([`DataConfig`][]).
    - ``model``: the ``[model]`` table ([`ModelConfig`][]).
    - ``optim``: the ``[optim]`` table ([`OptimConfig`][]).
    - ``loss``: the ``[loss]`` table ([`LossConfig`][]).
    - ``run``: the ``[run]`` table ([`RunConfig`][]).
    """

    data: DataConfig
    model: ModelConfig
    optim: OptimConfig = field(default_factory=OptimConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    run: RunConfig = field(default_factory=RunConfig)
