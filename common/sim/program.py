"""What the simulated compilers produce and what their execution records.

``Op``      one aten node after the decompose stage: its kind, coverage, work, and producers.
``Kernel``  a group of fused ops: the unit the tile, place and schedule stages work on.
``Event``   one interval on one engine of one chip in the timeline: compute, dma, launch, sync, comm, host.
``Program`` the compiled artefact: every stage's output kept for inspection (``program.stages``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Op kinds the passes distinguish. Attention is a pattern (bmm -> softmax -> bmm) that some policies fuse.
OP_KINDS = ("matmul", "pointwise", "reduction", "copy", "gather", "view")
EVENT_KINDS = ("compute", "dma", "launch", "sync", "comm", "host")
BOUNDS = ("compute", "memory", "scheduling", "communication")


@dataclass
class Op:
    name: str  # fx node name
    op: str  # short op name, e.g. "aten.mm"
    kind: str  # one of OP_KINDS
    coverage: str  # native | decomposed | fallback
    flops: float
    out_bytes: float
    in_bytes: dict[str, float]  # producer name (fx node or placeholder) -> bytes read from it
    shape: tuple = ()
    dtype: str = ""
    mnk: tuple | None = None  # (batch, M, K, N) for matmuls
    decomposed_into: tuple[str, ...] = ()
    params: tuple[str, ...] = ()  # names of the parameters (weights) this op reads
    pattern: str = ""  # e.g. "attention0" when part of a bmm-softmax-bmm chain
    in_shapes: dict[str, tuple] = field(default_factory=dict)  # producer -> shape of the view this op reads
    transposed_inputs: tuple[str, ...] = ()  # producers read through a view whose innermost stride != 1
    param_inputs: tuple[str, ...] = ()  # producers that are parameters (weights: laid out ahead of time)
    fallback_reason: str = ""  # why a fallback op left the machine: op coverage, its dtype, no cost rule


@dataclass
class Kernel:
    name: str
    kind: str  # dominant kind of its ops: matmul | attention | pointwise | reduction | copy | fallback
    ops: list[Op]
    tiling: dict = field(default_factory=dict)  # policy-specific: tiles, padded shape, sticks, efficiency
    bytes: dict[str, float] = field(default_factory=dict)  # memory level -> bytes moved
    inputs: dict[str, float] = field(default_factory=dict)  # external producer -> bytes
    outputs: dict[str, float] = field(default_factory=dict)  # op name -> bytes leaving the kernel
    padded_flops: float = 0.0
    layer: int | None = None

    @property
    def flops(self) -> float:
        return sum(o.flops for o in self.ops)

    @property
    def op_names(self) -> list[str]:
        return [o.op for o in self.ops]


@dataclass
class Event:
    name: str
    kind: str  # one of EVENT_KINDS
    engine: str  # e.g. "stream0", "host", "MXU", "DMA", "core3", "link"
    start: float  # seconds
    duration: float
    chip: int = 0
    flops: float = 0.0
    bytes: dict[str, float] = field(default_factory=dict)
    bound: str = "compute"  # one of BOUNDS: what set this event's duration
    kernel: str = ""
    floor: float = 0.0  # max(FLOPs/peak, bytes/bandwidth): the physics floor of this event
    detail: dict = field(default_factory=dict)

    @property
    def end(self) -> float:
        return self.start + self.duration

    def copy(self, **changes) -> Event:
        """``dataclasses.replace(self, **changes)`` at a sixth of its cost: the schedulers copy every event of a
        step, thousands of them. (Event has no ``__post_init__``, so copying its fields is the same.)"""
        if not changes.keys() <= _EVENT_FIELDS:
            raise TypeError(f"Event has no field(s) {sorted(changes.keys() - _EVENT_FIELDS)}")
        e = object.__new__(Event)
        e.__dict__.update(self.__dict__, **changes)
        return e


_EVENT_FIELDS = frozenset(Event.__dataclass_fields__)


@dataclass
class Program:
    backend: str
    chip: str
    n_chips: int
    dtype: str
    kernels: list[Kernel]
    stages: dict = field(default_factory=dict)  # stage name -> inspectable object (list / dict / DataFrame)
    notes: list[str] = field(default_factory=list)  # modelling assumptions and estimates used

    def summary(self) -> str:
        kinds: dict[str, int] = {}
        for k in self.kernels:
            kinds[k.kind] = kinds.get(k.kind, 0) + 1
        parts = ", ".join(f"{v} {k}" for k, v in sorted(kinds.items()))
        return (f"{self.backend} program for {self.n_chips}x {self.chip} ({self.dtype}): "
                f"{len(self.kernels)} kernels ({parts})")
