"""Reading the Shardy annotations JAX writes into HLO: meshes, shardings and shard_map regions.

JAX lowers with Shardy: the header's `frontend_attributes={xla.sdy.meshes={mesh =
#sdy.mesh<["x"=2, "y"=2]>}}` names the meshes; `xla.sdy.FuncResultSharding` custom calls pin
result shardings; a shard_map is a `xla.sdy.GlobalToLocalShape` custom call (global arrays in,
per-device pieces out), a call of `xla.sdy.manual_computation_body` (the per-device program)
and a `xla.sdy.LocalToGlobalShape` custom call (pieces in, global arrays out).
`sdy_shardings(instr, key, module)` reads the `#sdy.sharding...` text of one frontend
attribute as HloShardings; the partitioner uses these for the shard_map custom calls.
"""

from __future__ import annotations

import re

from ..errors import UnsupportedError
from ..ir.sharding import mesh_sharding

GLOBAL_TO_LOCAL = "xla.sdy.GlobalToLocalShape"
LOCAL_TO_GLOBAL = "xla.sdy.LocalToGlobalShape"
FUNC_RESULT_SHARDING = "xla.sdy.FuncResultSharding"
SHARDY_TARGETS = (GLOBAL_TO_LOCAL, LOCAL_TO_GLOBAL, FUNC_RESULT_SHARDING)

_MESH = re.compile(r"(\w+)\s*=\s*#sdy\.mesh<\[([^\]]*)\](?:\s*,\s*device_ids=\[([^\]]*)\])?>")
_AXIS = re.compile(r'"([^"]+)"\s*=\s*(\d+)')
_ONE = re.compile(r"<@(\w+)\s*,\s*\[((?:\{[^}]*\}\s*,?\s*)*)\]([^>]*)>")


def meshes(module) -> dict[str, tuple[dict[str, int], list[int] | None]]:
    """Mesh name -> (axis sizes in order, device ids or None for an iota)."""
    text = module.header_attrs.get("frontend_attributes", "").replace('\\"', '"')
    found = {}
    for name, axes, ids in _MESH.findall(text):
        sizes = {a: int(n) for a, n in _AXIS.findall(axes)}
        found[name] = (sizes, [int(i) for i in ids.split(",")] if ids else None)
    return found


def _frontend_attribute(instr, key: str) -> str | None:
    text = str(instr.attrs.get("frontend_attributes", "")).replace('\\"', '"')
    match = re.search(re.escape(key) + r'="(.*?)>"', text)
    return match.group(1) + ">" if match else None


def sdy_shardings(instr, key: str, module) -> list:
    """The HloShardings in `instr`'s frontend attribute `key` (one per value)."""
    text = _frontend_attribute(instr, key)
    if text is None:
        raise UnsupportedError(
            f"%{instr.name}: {instr.attrs.get('custom_call_target')} has no {key} attribute"
        )
    found = meshes(module)
    out = []
    for mesh, dims, rest in _ONE.findall(text):
        if mesh not in found:
            raise UnsupportedError(
                f"%{instr.name}: mesh @{mesh} is not in the header's xla.sdy.meshes"
            )
        axes = [tuple(re.findall(r'"([^"]+)"', d)) for d in re.findall(r"\{([^}]*)\}", dims)]
        if any(":" in d for d in re.findall(r"\{([^}]*)\}", dims)) or "unreduced" in rest:
            raise UnsupportedError(
                f"%{instr.name}: sub-axes and unreduced axes of Shardy shardings are not supported"
            )
        sizes, ids = found[mesh]
        try:
            out.append(mesh_sharding(sizes, axes, ids))
        except ValueError as exc:
            raise UnsupportedError(f"%{instr.name}: {exc}") from None
    return out


def shardy_target(instr) -> str | None:
    if instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") in SHARDY_TARGETS:
        return instr.attrs["custom_call_target"]
    return None
