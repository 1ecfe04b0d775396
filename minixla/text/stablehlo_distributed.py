"""StableHLO's collectives and shardings, as XLA's import writes them into HLO: part of the
converter in minixla.text.stablehlo (its Converter inherits these methods).

- collectives keep their replica groups and channel; an `all_to_all` that concatenates along
  another dim than it splits is the exchange plus a reshape and a transpose;
- `mhlo.sharding` becomes the instruction's sharding;
- Shardy (JAX's default partitioner): the `sdy.mesh` declarations go to the header's
  `xla.sdy.meshes`, an argument's `sdy.sharding` to its sharding and the frontend attribute
  `xla.sdy.sharding`, a result's to an `xla.sdy.FuncResultSharding` custom call;
  `sdy.sharding_constraint` is a `Sharding` custom call, and `sdy.manual_computation` (a
  shard_map) is `xla.sdy.GlobalToLocalShape`, a call of its body, `xla.sdy.LocalToGlobalShape`.
  minixla's SPMD partitioner reads that form (minixla.passes.shardy).
"""

from __future__ import annotations

from typing import Callable

from ..errors import HloParseError
from ..ir.attrs import Raw
from ..ir.instruction import HloInstruction
from ..ir.sharding import HloSharding, parse_sdy_shardings, parse_sharding
from ..ir.shapes import Shape
from .mlir import DialectAttr, MlirOp
from .stablehlo_rules import collective_attrs


class DistributedOps:
    """Converter methods for collectives and shardings (self is the Converter)."""

    meshes: dict  # the module's Shardy meshes, as minixla.ir.sharding.sdy_meshes reads them
    add: Callable[..., HloInstruction]  # the Converter's: one instruction into a scope

    def build_collective(self, op, scope, rule):
        """all_reduce, all_gather, reduce_scatter: one operand or several (a tuple result)."""
        operands = self.operands(op, scope)
        attrs = rule.attrs(op, operands)
        if op.regions:
            attrs["to_apply"] = self.region_computation(op.regions[0], scope, "region")
        return self.add(scope, rule.opcode, self.result_shape(op), operands, attrs)

    def build_all_to_all(self, op, scope, rule):
        """HLO's array all-to-all splits and concatenates along one dim; StableHLO's may
        concatenate along another, which is the same exchange followed by moving the
        source-device factor of the split dim in front of the concat dim (as XLA does)."""
        operands = self.operands(op, scope)
        attrs = collective_attrs(op, operands)
        split, concat = int(op.get("split_dimension")), int(op.get("concat_dimension"))
        count = int(op.get("split_count"))
        if len(operands) != 1:
            raise self.error(op, "stablehlo.all_to_all of several operands")
        (x,) = operands
        exchanged = self.add(scope, "all-to-all", x.shape, [x], {**attrs, "dimensions": (split,)})
        if split == concat:
            return exchanged
        dims = list(x.shape.dims)
        pieces = dims[:split] + [count, dims[split] // count] + dims[split + 1 :]
        order = [i for i in range(len(pieces)) if i != split]
        before = concat + (1 if concat > split else 0)  # the concat dim among `pieces`
        order.insert(order.index(before), split)
        split_up = self.add(scope, "reshape", x.shape.with_dims(pieces), [exchanged])
        moved = x.shape.with_dims([pieces[i] for i in order])
        moved = self.add(scope, "transpose", moved, [split_up], {"dimensions": tuple(order)})
        return self.add(scope, "reshape", self.result_shape(op), [moved])

    # -- shardings ------------------------------------------------------------------------
    def keep_sharding(self, instr: HloInstruction, attrs: dict) -> None:
        """`mhlo.sharding` becomes the instruction's sharding; `sdy.sharding` is kept as the
        frontend attribute XLA's import writes and converted to a sharding as well."""
        sharding = attrs.get("mhlo.sharding")
        if isinstance(sharding, str):
            instr.attrs["sharding"] = self.hlo_sharding(sharding)
        sdy = attrs.get("sdy.sharding")
        if sdy is not None:
            _set_frontend_attribute(instr, "xla.sdy.sharding", str(sdy))
            converted = self.sdy_sharding(str(sdy))
            if converted is not None and "sharding" not in instr.attrs:
                instr.attrs["sharding"] = converted

    def keep_op_attrs(self, instr: HloInstruction, op: MlirOp) -> None:
        self.keep_sharding(instr, op.attrs)
        frontend = op.attrs.get("mhlo.frontend_attributes")
        if isinstance(frontend, dict):
            for key, value in frontend.items():
                _set_frontend_attribute(instr, key, str(value))

    def hlo_sharding(self, text: str) -> HloSharding:
        try:
            return parse_sharding(text)
        except ValueError as exc:
            raise HloParseError(f"mhlo.sharding {text!r}: {exc}") from None

    def sdy_sharding(self, text: str) -> HloSharding | None:
        """The sharding of one `#sdy.sharding<@mesh, [...]>`; None where it cannot be
        expressed (sub-axes): shardings never change values, so it is then only kept as text."""
        try:
            found = parse_sdy_shardings(text, self.meshes)
        except ValueError:
            return None
        return found[0] if len(found) == 1 else None

    def result_sharding(self, scope, value: HloInstruction, attrs: dict):
        """A result's `sdy.sharding` pins it as XLA's import does, through an
        xla.sdy.FuncResultSharding custom call; an `mhlo.sharding` goes on the value."""
        sdy = attrs.get("sdy.sharding")
        if sdy is None:
            if isinstance(attrs.get("mhlo.sharding"), str):
                value.attrs["sharding"] = self.hlo_sharding(attrs["mhlo.sharding"])
            return value
        pinned = self.add(
            scope,
            "custom-call",
            value.shape,
            [value],
            {
                "custom_call_target": "xla.sdy.FuncResultSharding",
                "custom_call_has_side_effect": True,
            },
        )
        _set_frontend_attribute(
            pinned, "xla.sdy.sharding", f"#sdy.sharding_per_value<[<{_sdy_body(sdy)}>]>"
        )
        return pinned

    def build_sharding_constraint(self, op, scope, rule):
        """`sdy.sharding_constraint %x <@mesh, [...]>` (and `sdy.reshard`): a `Sharding`
        custom call, as with_sharding_constraint is in HLO."""
        (x,) = self.operands(op, scope)
        sdy = next((w for w in op.words if isinstance(w, DialectAttr)), op.get("sharding"))
        if sdy is None:
            raise self.error(op, f"{op.name} without a sharding")
        call = self.add(scope, "custom-call", x.shape, [x], {"custom_call_target": "Sharding"})
        converted = self.sdy_sharding(str(sdy))
        if converted is not None:
            call.attrs["sharding"] = converted
        _set_frontend_attribute(
            call, "xla.sdy.sharding", f"#sdy.sharding_per_value<[<{_sdy_body(sdy)}>]>"
        )
        return call

    def build_manual_computation(self, op, scope, rule):
        """A shard_map as XLA's import writes it: xla.sdy.GlobalToLocalShape (global arrays in,
        per-device pieces out), a call of the body, xla.sdy.LocalToGlobalShape back."""
        operands = self.operands(op, scope)
        (block,) = op.regions
        axes = ", ".join(f'"{a}"' for a in (op.get("manual_axes") or {}))
        manual = f"#sdy<manual_axes{{{axes}}}>"
        pieces = Shape.tuple_of(s for _, s in block.args) if len(block.args) != 1 else None
        local = self.add(
            scope,
            "custom-call",
            pieces or block.args[0][1],
            operands,
            {
                "custom_call_target": "xla.sdy.GlobalToLocalShape",
                "custom_call_has_side_effect": True,
            },
        )
        _set_frontend_attribute(local, "xla.sdy.in_shardings", _per_value(op.get("in_shardings")))
        _set_frontend_attribute(local, "xla.sdy.manual_axes", manual)
        args = (
            [
                self.add(scope, "get-tuple-element", s, (local,), {"index": i})
                for i, (_, s) in enumerate(block.args)
            ]
            if pieces
            else [local]
        )
        body = self.region_computation(block, scope, "xla.sdy.manual_computation_body")
        called = self.add(scope, "call", body.root.shape, args, {"to_apply": body})
        _set_frontend_attribute(called, "inlineable", "false")
        results = (
            [
                self.add(scope, "get-tuple-element", s, (called,), {"index": i})
                for i, s in enumerate(called.shape.tuple_shapes)
            ]
            if called.shape.is_tuple
            else [called]
        )
        result = self.add(
            scope,
            "custom-call",
            self.result_shape(op),
            results,
            {
                "custom_call_target": "xla.sdy.LocalToGlobalShape",
                "custom_call_has_side_effect": True,
            },
        )
        _set_frontend_attribute(
            result, "xla.sdy.out_shardings", _per_value(op.get("out_shardings"))
        )
        _set_frontend_attribute(result, "xla.sdy.manual_axes", manual)
        return result


def _set_frontend_attribute(instr: HloInstruction, key: str, value: str) -> None:
    """Adds `key="value"` to the instruction's frontend_attributes (kept as text)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    entry = f'{key}="{escaped}"'
    current = instr.attrs.get("frontend_attributes")
    body = str(current)[1:-1] if current is not None else ""
    instr.attrs["frontend_attributes"] = Raw("{" + (body + "," if body else "") + entry + "}")


def _sdy_body(sdy) -> str:
    """`@mesh, [{"x"}, {}]` of `#sdy.sharding<@mesh, [{"x"}, {}]>`."""
    return sdy.raw if isinstance(sdy, DialectAttr) else str(sdy)


def _per_value(shardings) -> str:
    items = ", ".join(f"<{_sdy_body(s)}>" for s in shardings or [])
    return f"#sdy.sharding_per_value<[{items}]>"
