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
from ..ir.sharding import parse_sdy_shardings, sdy_meshes

GLOBAL_TO_LOCAL = "xla.sdy.GlobalToLocalShape"
LOCAL_TO_GLOBAL = "xla.sdy.LocalToGlobalShape"
FUNC_RESULT_SHARDING = "xla.sdy.FuncResultSharding"
SHARDY_TARGETS = (GLOBAL_TO_LOCAL, LOCAL_TO_GLOBAL, FUNC_RESULT_SHARDING)


def meshes(module) -> dict[str, tuple[dict[str, int], list[int] | None]]:
    """Mesh name -> (axis sizes in order, device ids or None for an iota)."""
    return sdy_meshes(module.header_attrs.get("frontend_attributes", "").replace('\\"', '"'))


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
    try:
        return parse_sdy_shardings(text, meshes(module))
    except ValueError as exc:
        raise UnsupportedError(f"%{instr.name}: {exc}") from None


def shardy_target(instr) -> str | None:
    if instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") in SHARDY_TARGETS:
        return instr.attrs["custom_call_target"]
    return None
