"""Shardings and replica groups as XLA prints them, parsed into structured values.

`HloSharding` is an instruction's `sharding=`: replicated, maximal on one device, manual,
unknown, tiled over a device grid (`TileAssignment`, explicit or iota form, optionally with
trailing subgroup dims that are replicated or manual), or a tuple of those. `ReplicaGroups`
is a collective's `replica_groups=` in the list, iota or mesh form. `SourceTargetPairs` is
collective-permute's `source_target_pairs=`. Each prints back in the form it was read.

Grammar (spaces between parts are optional where XLA allows them):

    sharding    := '{' single '}' | '{' '{' single '}' (',' '{' single '}')* '}'
    single      := 'replicated' | 'manual' | 'unknown' | 'maximal device=' INT
                 | 'devices=' tile [ 'last_tile_dim_replicate' | 'last_tile_dims={' T (',' T)* '}' ]
    tile        := '[' INT (',' INT)* ']' ( INT (',' INT)* | iota )
    iota        := '<=[' INT (',' INT)* ']' [ 'T(' INT (',' INT)* ')' ]
    groups      := '{' ( '{' INT (',' INT)* '}' )* '}' | '[' G ',' S ']' iota
                 | "mesh[" "'" AXIS "'=" INT (',' ...)* "]" "{" "'" AXIS "'" (',' ...)* "}"
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from math import prod

import numpy as np

_INTS = r"\d+(?:\s*,\s*\d+)*"
_IOTA = re.compile(r"<=\s*\[(" + _INTS + r")\]\s*(?:T\s*\((" + _INTS + r")\))?")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v.strip())


def _join(values) -> str:
    return ",".join(map(str, values))


def _iota_devices(dims, reshape, perm) -> np.ndarray:
    """XLA's iota tile assignment: iota(prod), reshaped, transposed, reshaped to `dims`."""
    grid = np.arange(prod(reshape)).reshape(reshape)
    if perm is not None:
        if sorted(perm) != list(range(len(reshape))):
            raise ValueError(f"T({_join(perm)}) is not a permutation of {len(reshape)} dims")
        grid = grid.transpose(perm)
    if prod(reshape) != prod(dims):
        raise ValueError(f"iota of {prod(reshape)} devices cannot fill a [{_join(dims)}] grid")
    return grid.reshape(dims)


@dataclass(frozen=True)
class TileAssignment:
    """A grid of device ids: `dims`, filled from an explicit list or an iota."""

    dims: tuple[int, ...]
    device_list: tuple[int, ...] | None = None  # explicit form
    iota_reshape: tuple[int, ...] | None = None  # iota form: <=[reshape]T(perm)
    iota_perm: tuple[int, ...] | None = None

    @staticmethod
    def iota(dims, reshape=None, perm=None) -> "TileAssignment":
        dims = tuple(dims)
        return TileAssignment(
            dims, None, tuple(reshape or (prod(dims),)), None if perm is None else tuple(perm)
        )

    @staticmethod
    def from_array(devices: np.ndarray) -> "TileAssignment":
        devices = np.asarray(devices)
        flat = tuple(int(d) for d in devices.reshape(-1))
        if flat == tuple(range(len(flat))):
            return TileAssignment.iota(devices.shape)
        return TileAssignment(tuple(devices.shape), flat)

    def devices(self) -> np.ndarray:
        if self.device_list is not None:
            if len(self.device_list) != prod(self.dims):
                raise ValueError(
                    f"[{_join(self.dims)}] needs {prod(self.dims)} device ids, "
                    f"got {len(self.device_list)}"
                )
            return np.array(self.device_list, dtype=np.int64).reshape(self.dims)
        return _iota_devices(self.dims, self.iota_reshape, self.iota_perm)

    @property
    def num_devices(self) -> int:
        return prod(self.dims)

    def __str__(self) -> str:
        head = f"[{_join(self.dims)}]"
        if self.device_list is not None:
            return head + _join(self.device_list)
        text = head + f"<=[{_join(self.iota_reshape)}]"
        return text + (f"T({_join(self.iota_perm)})" if self.iota_perm is not None else "")


def _parse_tile(text: str) -> tuple[TileAssignment, str]:
    """A tile assignment at the start of `text`, and the rest."""
    match = re.match(r"\[\s*(" + _INTS + r")\s*\]\s*", text)
    if not match:
        raise ValueError(f"expected a device grid like [2,2] in {text!r}")
    dims, rest = _ints(match.group(1)), text[match.end() :]
    iota = _IOTA.match(rest)
    if iota:
        perm = _ints(iota.group(2)) if iota.group(2) else None
        tile = TileAssignment(dims, None, _ints(iota.group(1)), perm)
        rest = rest[iota.end() :]
    else:
        devices = re.match(_INTS, rest)
        if not devices:
            raise ValueError(f"expected device ids or an iota after [{_join(dims)}]")
        tile = TileAssignment(dims, _ints(devices.group(0)))
        rest = rest[devices.end() :]
    tile.devices()  # validates the sizes now, at parse time
    return tile, rest.strip()


SUBGROUP_TYPES = ("replicated", "manual", "unreduced")
_SIMPLE = ("replicated", "manual", "unknown", "unreduced")


@dataclass(frozen=True)
class HloSharding:
    """One `sharding=` value. kind: replicated | manual | unknown | unreduced | maximal |
    tiled | tuple | named (the `mesh[...]` form, kept as text and not partitioned). A tiled
    sharding's grid has one dim per data dim, then one per entry of `subgroups` (devices
    along those dims hold replicated or manual copies)."""

    kind: str
    tile: TileAssignment | None = None
    subgroups: tuple[str, ...] = ()
    device: int | None = None
    elements: tuple["HloSharding", ...] = ()
    extra: str = field(default="", compare=False)  # metadata=, shard_as ..., kept verbatim

    @property
    def grid(self) -> TileAssignment:
        """The tile assignment of a tiled sharding; the other kinds have none."""
        if self.tile is None:
            raise ValueError(f"a {self.kind} sharding has no tile assignment")
        return self.tile

    # -- construction ---------------------------------------------------------------------
    @staticmethod
    def replicate() -> "HloSharding":
        return HloSharding("replicated")

    @staticmethod
    def manual() -> "HloSharding":
        return HloSharding("manual")

    @staticmethod
    def maximal(device: int) -> "HloSharding":
        return HloSharding("maximal", device=device)

    @staticmethod
    def tiled(devices, subgroups: tuple[str, ...] = ()) -> "HloSharding":
        """A tiled sharding over the grid `devices` (an array, or dims for an iota grid)."""
        tile = (
            TileAssignment.iota(devices)
            if isinstance(devices, (tuple, list))
            else TileAssignment.from_array(devices)
        )
        sharding = HloSharding("tiled", tile, tuple(subgroups))
        return sharding.normalized()

    @staticmethod
    def tuple_of(elements) -> "HloSharding":
        return HloSharding("tuple", elements=tuple(elements))

    def normalized(self) -> "HloSharding":
        """Every device holding the whole array is `{replicated}` (as XLA simplifies it)."""
        if (
            self.kind == "tiled"
            and self.data_rank >= 0
            and all(d == 1 for d in self.grid.dims[: self.data_rank])
            and set(self.subgroups) <= {"replicated"}
        ):
            return HloSharding.replicate()
        return self

    # -- queries --------------------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.kind == "tuple"

    @property
    def is_replicated(self) -> bool:
        if self.kind == "tuple":
            return all(e.is_replicated for e in self.elements)
        return self.kind == "replicated" or self.normalized().kind == "replicated"

    @property
    def is_tiled(self) -> bool:
        return self.kind == "tiled"

    @property
    def is_manual(self) -> bool:
        return self.kind == "manual" or (self.kind == "tiled" and "manual" in self.subgroups)

    @property
    def data_rank(self) -> int:
        return len(self.tile.dims) - len(self.subgroups) if self.tile is not None else 0

    @property
    def tile_dims(self) -> tuple[int, ...]:
        """How many pieces each data dim is cut into."""
        return self.tile.dims[: self.data_rank] if self.tile is not None else ()

    @property
    def num_devices(self) -> int | None:
        return self.tile.num_devices if self.tile is not None else None

    def leaves(self) -> list["HloSharding"]:
        if self.kind == "tuple":
            return [leaf for e in self.elements for leaf in e.leaves()]
        return [self]

    def tile_index(self, device: int) -> tuple[int, ...]:
        """The grid position (data dims only) of `device`'s shard."""
        index = _tile_positions(self).get(device)
        if index is None:
            raise ValueError(f"device {device} is not in the grid {self.tile}")
        return index

    def shard_dims(self, dims) -> tuple[int, ...]:
        """Per-device dims of an array of `dims` (pieces rounded up, as XLA pads them)."""
        if self.kind != "tiled":
            return tuple(dims)
        return tuple(-(-d // t) for d, t in zip(dims, self.tile_dims))

    def shard_bounds(self, dims, device: int) -> tuple[tuple[int, int], ...]:
        """[start, limit) per dim of the piece `device` holds (clipped to the array)."""
        if self.kind != "tiled":
            return tuple((0, d) for d in dims)
        index = self.tile_index(device)
        pieces = self.shard_dims(dims)
        return tuple((min(i * p, d), min((i + 1) * p, d)) for i, p, d in zip(index, pieces, dims))

    # -- text -----------------------------------------------------------------------------
    def body(self) -> str:
        """The text inside the braces."""
        if self.kind == "tuple":
            return ", ".join(str(e) for e in self.elements)
        if self.kind == "named":
            return self.extra
        if self.kind == "maximal":
            text = f"maximal device={self.device}"
        elif self.kind in _SIMPLE:
            text = self.kind
        else:
            text = f"devices={self.tile}"
            if self.subgroups == ("replicated",):
                text += " last_tile_dim_replicate"
            elif self.subgroups:
                text += " last_tile_dims={" + ", ".join(self.subgroups) + "}"
        return text + (" " + self.extra if self.extra else "")

    def __str__(self) -> str:
        return "{" + self.body() + "}"


@functools.lru_cache(maxsize=4096)  # the partitioner asks for every device of each sharding
def _tile_positions(sharding: HloSharding) -> dict[int, tuple[int, ...]]:
    """device -> the grid position (data dims only) of its first shard."""
    positions: dict[int, tuple[int, ...]] = {}
    for where, device in np.ndenumerate(sharding.grid.devices()):
        positions.setdefault(int(device), tuple(int(v) for v in where[: sharding.data_rank]))
    return positions


def parse_sharding(text: str) -> HloSharding:
    """A `sharding=` value such as `{devices=[2,1]<=[2]}`; raises ValueError when malformed."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"a sharding is written in braces, got {text!r}")
    inner = text[1:-1].strip()
    if inner.startswith("{") or not inner:
        return HloSharding.tuple_of(parse_sharding(part) for part in _split_top(inner))
    return _parse_single(inner)


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return parts + ([tail] if tail else [])


def _parse_single(text: str) -> HloSharding:
    word = re.match(r"[a-z_]+", text)
    head = word.group(0) if word else ""
    if head in _SIMPLE:
        return HloSharding(head, extra=text[len(head) :].strip())
    if head == "maximal":
        match = re.match(r"maximal\s+device\s*=\s*(\d+)", text)
        if not match:
            raise ValueError(f"expected 'maximal device=N', got {text!r}")
        return HloSharding("maximal", device=int(match.group(1)), extra=text[match.end() :].strip())
    if head in ("mesh", "maximal_mesh"):  # the named (Shardy-style) form, kept as text
        return HloSharding("named", extra=text)
    if head != "devices":
        raise ValueError(
            f"unknown sharding {text!r}: expected replicated, maximal, manual, "
            f"unknown or devices=[...]"
        )
    tile, rest = _parse_tile(text[len("devices") :].lstrip().lstrip("=").lstrip())
    subgroups: tuple[str, ...] = ()
    if rest.startswith("last_tile_dim_replicate"):
        subgroups, rest = ("replicated",), rest[len("last_tile_dim_replicate") :].strip()
    elif rest.startswith("last_tile_dims"):
        match = re.match(r"last_tile_dims\s*=\s*\{([^}]*)\}", rest)
        if not match:
            raise ValueError(f"expected last_tile_dims={{...}} in {text!r}")
        subgroups = tuple(t.strip() for t in match.group(1).split(","))
        bad = [t for t in subgroups if t not in SUBGROUP_TYPES]
        if bad:
            raise ValueError(
                f"unknown last_tile_dims type {bad[0]!r}; expected one of "
                f"{', '.join(SUBGROUP_TYPES)}"
            )
        rest = rest[match.end() :].strip()
    if len(subgroups) > len(tile.dims):
        raise ValueError(f"{len(subgroups)} subgroup dims but the grid has {len(tile.dims)}")
    return HloSharding("tiled", tile, subgroups, extra=rest)


# -- replica groups ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplicaGroups:
    """`replica_groups=`: the groups of participant ids, and the spelling they came in."""

    groups: tuple[tuple[int, ...], ...]  # () means one group of every participant
    text: str = field(default="", compare=False)

    @staticmethod
    def of(groups) -> "ReplicaGroups":
        groups = tuple(tuple(int(i) for i in g) for g in groups)
        return ReplicaGroups(groups, "{" + ",".join("{" + _join(g) + "}" for g in groups) + "}")

    def expanded(self, count: int) -> tuple[tuple[int, ...], ...]:
        """The groups over `count` participants (`{}` = all of them)."""
        return self.groups or (tuple(range(count)),)

    def group_of(self, participant: int, count: int) -> tuple[int, ...]:
        for group in self.expanded(count):
            if participant in group:
                return group
        raise ValueError(f"participant {participant} is in no replica group of {self}")

    def check_cover(self, count: int) -> None:
        """Every participant in 0..count-1 in exactly one group."""
        seen = [i for g in self.expanded(count) for i in g]
        out_of_range = sorted(i for i in seen if not 0 <= i < count)
        if out_of_range:
            raise ValueError(
                f"replica groups {self} name id {out_of_range[0]}, but there are "
                f"only {count} participants"
            )
        twice = sorted({i for i in seen if seen.count(i) > 1})
        if twice:
            raise ValueError(f"replica groups {self} list id {twice[0]} more than once")
        missing = sorted(set(range(count)) - set(seen))
        if missing:
            raise ValueError(
                f"replica groups {self} do not cover participants {missing} of {count}"
            )

    def __str__(self) -> str:
        return self.text or ReplicaGroups.of(self.groups).text


def parse_replica_groups(text: str) -> ReplicaGroups:
    text = text.strip()
    if text.startswith("{"):
        inner = text[1:-1].strip()
        groups = []
        for part in _split_top(inner):
            if not (part.startswith("{") and part.endswith("}")):
                raise ValueError(f"expected a group like {{0,1}}, got {part!r}")
            groups.append(_ints(part[1:-1]))
        return ReplicaGroups(tuple(groups), text)
    if text.startswith("["):
        tile, rest = _parse_tile(text)
        if rest or len(tile.dims) != 2 or tile.device_list is not None:
            raise ValueError(f"iota replica groups are [groups,size]<=[...], got {text!r}")
        grid = tile.devices()
        return ReplicaGroups(tuple(tuple(int(i) for i in row) for row in grid), text)
    if text.startswith("mesh"):
        return _parse_mesh_groups(text)
    raise ValueError(f"unknown replica_groups form {text!r}")


def _parse_mesh_groups(text: str) -> ReplicaGroups:
    """`mesh['a'=2,'b'=4] {'b'}`: devices are an iota over the mesh; a group varies the listed
    axes (in the order listed) with the other axes fixed."""
    match = re.fullmatch(r"mesh\s*\[([^\]]*)\]\s*\{([^}]*)\}", text)
    if not match:
        raise ValueError(f"expected mesh['axis'=N,...] {{'axis',...}}, got {text!r}")
    axes: dict[str, int] = {}
    for part in _split_top(match.group(1)):
        axis = re.fullmatch(r"'([^']*)'\s*=\s*(\d+)", part)
        if not axis:
            raise ValueError(f"bad mesh axis {part!r} in {text!r}")
        axes[axis.group(1)] = int(axis.group(2))
    names = [n.strip() for n in match.group(2).split(",") if n.strip()]
    chosen = []
    for name in names:
        if not (name.startswith("'") and name.endswith("'")) or name[1:-1] not in axes:
            raise ValueError(
                f"replica group axis {name} is not a mesh axis of {text!r} "
                f"(sub-axes are not supported)"
            )
        chosen.append(list(axes).index(name[1:-1]))
    grid = np.arange(prod(axes.values())).reshape(tuple(axes.values()))
    others = [i for i in range(len(axes)) if i not in chosen]
    size = prod(grid.shape[i] for i in chosen)
    groups = grid.transpose(others + chosen).reshape(-1, size)
    return ReplicaGroups(tuple(tuple(int(i) for i in g) for g in groups), text)


@dataclass(frozen=True)
class SourceTargetPairs:
    """collective-permute's `source_target_pairs={{0,1},{1,0}}`."""

    pairs: tuple[tuple[int, int], ...]

    def __str__(self) -> str:
        return "{" + ",".join(f"{{{s},{t}}}" for s, t in self.pairs) + "}"


def parse_source_target_pairs(text: str) -> SourceTargetPairs:
    groups = parse_replica_groups(text.strip()).groups
    if any(len(g) != 2 for g in groups):
        raise ValueError(f"source_target_pairs are pairs {{source,target}}, got {text!r}")
    return SourceTargetPairs(tuple((s, t) for s, t in groups))


# -- who takes part in a collective ---------------------------------------------------------------
# XLA's CollectiveOpGroupMode, from channel_id and use_global_device_ids: what the ids in
# replica_groups name, and which devices one group spans.
CROSS_REPLICA, CROSS_PARTITION, CROSS_REPLICA_AND_PARTITION, FLATTENED_ID = (
    "cross-replica",
    "cross-partition",
    "cross-replica-and-partition",
    "flattened-id",
)
# collectives whose row carries use_global_device_ids (the others go cross-partition with a
# channel_id)
_HAS_GLOBAL_IDS_FLAG = (
    "all-reduce",
    "all-reduce-start",
    "all-gather",
    "all-gather-start",
    "reduce-scatter",
)


def group_mode(instr) -> str:
    has_channel = instr.attrs.get("channel_id") is not None
    global_ids = bool(instr.attrs.get("use_global_device_ids"))
    if global_ids:
        if not has_channel:
            raise ValueError("use_global_device_ids=true needs a channel_id")
        return FLATTENED_ID
    if not has_channel:
        return CROSS_REPLICA
    return CROSS_REPLICA_AND_PARTITION if instr.opcode in _HAS_GLOBAL_IDS_FLAG else CROSS_PARTITION


def group_id_count(mode: str, replicas: int, partitions: int) -> int:
    """How many ids replica_groups ranges over in `mode`."""
    return {
        CROSS_REPLICA: replicas,
        CROSS_PARTITION: partitions,
        CROSS_REPLICA_AND_PARTITION: replicas,
        FLATTENED_ID: replicas * partitions,
    }[mode]


def participants(instr, device: int, replicas: int, partitions: int) -> tuple[int, ...]:
    """The global device ids (replica * partitions + partition) in `device`'s group, in the
    order the collective combines them (ranks)."""
    replica, partition = divmod(device, partitions)
    mode = group_mode(instr)
    groups = instr.attrs.get("replica_groups") or ReplicaGroups(())
    count = group_id_count(mode, replicas, partitions)
    if mode == FLATTENED_ID:
        return groups.group_of(device, count)
    if mode == CROSS_PARTITION:
        return tuple(replica * partitions + p for p in groups.group_of(partition, count))
    group = groups.group_of(replica, count)
    if mode == CROSS_REPLICA:
        return tuple(r * partitions + partition for r in group)
    return tuple(r * partitions + p for r in group for p in range(partitions))


def permute_peers(instr, device: int, replicas: int, partitions: int):
    """collective-permute: (the device `device` receives from or None, the one it sends to or
    None); ids in source_target_pairs are replicas without a channel_id, else partitions."""
    replica, partition = divmod(device, partitions)
    by_partition = instr.attrs.get("channel_id") is not None
    me = partition if by_partition else replica
    to_device = (
        (lambda i: replica * partitions + i)
        if by_partition
        else (lambda i: i * partitions + partition)
    )
    pairs = instr.attrs["source_target_pairs"].pairs
    sources = [s for s, t in pairs if t == me]
    targets = [t for s, t in pairs if s == me]
    if len(sources) > 1:
        raise ValueError(
            f"{'partition' if by_partition else 'replica'} {me} receives from "
            f"{len(sources)} sources"
        )
    return (to_device(sources[0]) if sources else None, [to_device(t) for t in targets])


def check_collective(instr, replicas: int, partitions: int) -> None:
    """Replica groups name ids that exist, none twice, and cover every id."""
    if "replica_groups" in instr.attrs:
        mode = group_mode(instr)
        instr.attrs["replica_groups"].check_cover(group_id_count(mode, replicas, partitions))
    if "source_target_pairs" in instr.attrs:
        count = partitions if instr.attrs.get("channel_id") is not None else replicas
        bad = [
            i
            for pair in instr.attrs["source_target_pairs"].pairs
            for i in pair
            if not 0 <= i < count
        ]
        if bad:
            raise ValueError(f"source_target_pairs name id {bad[0]}, but there are only {count}")


def check_sharding(sharding: HloSharding, shape, num_devices: int | None) -> None:
    """Tuple shardings match the tuple, a tiled grid has one dim per array dim (plus subgroup
    dims) and holds each of the `num_devices` devices once."""
    if sharding.is_tuple:
        if not shape.is_tuple:  # outfeed/infeed: the sharding describes the operands
            return
        leaves = leaf_shapes(shape)
        if len(sharding.elements) != len(leaves):
            raise ValueError(
                f"tuple sharding has {len(sharding.elements)} elements for "
                f"{len(leaves)} array leaves of {shape}"
            )
        for element, leaf in zip(sharding.elements, leaves):
            check_sharding(element, leaf, num_devices)
        return
    if (
        sharding.kind == "maximal"
        and num_devices is not None
        and not 0 <= (sharding.device or 0) < num_devices
    ):
        raise ValueError(f"maximal device={sharding.device}, but there are {num_devices} devices")
    if sharding.kind != "tiled":
        return
    if shape.is_array and sharding.data_rank != shape.rank:
        raise ValueError(
            f"sharding {sharding} tiles {sharding.data_rank} dims of a rank {shape.rank} array"
        )
    if num_devices is not None:
        ids = sorted(int(d) for d in sharding.grid.devices().reshape(-1))
        if ids != list(range(num_devices)):
            raise ValueError(
                f"sharding {sharding} spans {len(ids)} devices, but the program "
                f"runs on {num_devices} (num_partitions)"
            )


def leaf_shapes(shape) -> list:
    """The non-tuple shapes of `shape`, depth first (a tuple sharding has one entry each)."""
    if shape.is_tuple:
        return [leaf for s in shape.tuple_shapes for leaf in leaf_shapes(s)]
    return [shape]


_SDY_MESH = re.compile(r"(\w+)\s*=\s*#sdy\.mesh<\[([^\]]*)\](?:\s*,\s*device_ids=\[([^\]]*)\])?>")
_SDY_AXIS = re.compile(r'"([^"]+)"\s*=\s*(\d+)')
_SDY_ONE = re.compile(r"<@(\w+)\s*,\s*\[((?:\{[^}]*\}\s*,?\s*)*)\]([^>]*)>")

Mesh = tuple[dict[str, int], "list[int] | None"]


def sdy_meshes(text: str) -> dict[str, Mesh]:
    """The Shardy meshes `name = #sdy.mesh<["x"=2, "y"=2]>` in `text` (the header's
    xla.sdy.meshes): name -> (axis sizes in order, device ids or None for an iota)."""
    found = {}
    for name, axes, ids in _SDY_MESH.findall(text):
        sizes = {a: int(n) for a, n in _SDY_AXIS.findall(axes)}
        found[name] = (sizes, [int(i) for i in ids.split(",")] if ids else None)
    return found


def parse_sdy_shardings(text: str, meshes: dict[str, Mesh]) -> list[HloSharding]:
    """The HloSharding of each `<@mesh, [{"x"}, {}]>` in `text` (a `#sdy.sharding<...>` or
    `#sdy.sharding_per_value<[...]>`); ValueError for an unknown mesh, sub-axes or unreduced
    axes."""
    out = []
    for mesh, dims, rest in _SDY_ONE.findall(text):
        if mesh not in meshes:
            raise ValueError(f"mesh @{mesh} is not one of the module's Shardy meshes")
        axes = [tuple(re.findall(r'"([^"]+)"', d)) for d in re.findall(r"\{([^}]*)\}", dims)]
        if any(":" in d for d in re.findall(r"\{([^}]*)\}", dims)) or "unreduced" in rest:
            raise ValueError("sub-axes and unreduced axes of Shardy shardings are not supported")
        sizes, ids = meshes[mesh]
        out.append(mesh_sharding(sizes, axes, ids))
    return out


def mesh_sharding(axis_sizes: dict[str, int], dim_axes, device_ids=None) -> HloSharding:
    """The HLO sharding of an array whose dim i is cut by the mesh axes `dim_axes[i]` (major
    to minor): the mesh's device grid transposed so the axes of dim 0 come first, then those
    of dim 1, ..., then the unused axes as one replicated subgroup dim."""
    names = list(axis_sizes)
    grid = (
        np.arange(prod(axis_sizes.values())).reshape(tuple(axis_sizes.values()))
        if device_ids is None
        else np.asarray(device_ids).reshape(tuple(axis_sizes.values()))
    )
    used = [a for axes in dim_axes for a in axes]
    unknown = [a for a in used if a not in axis_sizes]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a mesh axis of {names}")
    if len(set(used)) != len(used):
        raise ValueError(f"a mesh axis cuts two dims: {list(dim_axes)}")
    rest = [a for a in names if a not in used]
    grid = grid.transpose([names.index(a) for a in used + rest])
    tiles = [prod(axis_sizes[a] for a in axes) for axes in dim_axes]
    replicated = prod(axis_sizes[a] for a in rest)
    if replicated > 1:
        return HloSharding.tiled(grid.reshape(tiles + [replicated]), ("replicated",))
    return HloSharding.tiled(grid.reshape(tiles))
