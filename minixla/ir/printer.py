"""Printer for XLA's HLO text (the default `%`-prefixed style with computation signatures).

Attribute order follows XLA: op-specific attributes (table order), called computations,
attributes the table does not know (kept verbatim), then the generic ones (sharding, ...,
control-predecessors, metadata, backend_config). Parse -> print is a fixed point after one round.
"""

from __future__ import annotations

from .attrs import GENERIC_ATTRS, attr_kind
from .computation import HloComputation
from .instruction import HloInstruction
from .literal_text import format_literal
from .module import HloModule


def module_to_text(
    module: HloModule, *, print_metadata: bool = True, print_stack_frames: bool = True
) -> str:
    header = "HloModule " + module.name
    attrs = []
    if module.is_scheduled:
        attrs.append("is_scheduled=true")
    if module.input_output_alias:
        attrs.append(
            "input_output_alias={ "
            + ", ".join(
                "{"
                + ",".join(map(str, e.output_index))
                + "}: ("
                + f"{e.param_number}, {{"
                + ",".join(map(str, e.param_index))
                + f"}}, {e.kind})"
                for e in module.input_output_alias
            )
            + " }"
        )
    if module.buffer_donors:
        attrs.append(
            "buffer_donor={ "
            + ", ".join(
                f"({number}, {{" + ",".join(map(str, index)) + "})"
                for number, index in module.buffer_donors
            )
            + " }"
        )
    attrs.append(f"entry_computation_layout={module.program_shape()}")
    attrs.extend(f"{name}={value}" for name, value in module.header_attrs.items())
    lines = [header + ", " + ", ".join(attrs), ""]
    if module.stack_frame_text and print_stack_frames:
        lines += [module.stack_frame_text, ""]
    orders: dict = {}  # each computation's instruction post-order, worked out once
    for comp in module.computation_post_order(orders):
        lines.append(computation_to_text(comp, print_metadata=print_metadata, orders=orders))
        lines.append("")
    return "\n".join(lines)


def computation_to_text(
    comp: HloComputation, *, print_metadata: bool = True, orders: dict | None = None
) -> str:
    """`orders`: post-orders already worked out, by computation id (module_to_text's)."""
    params = ", ".join(f"{p.name}: {p.shape.without_layout()}" for p in comp.parameters)
    prefix = "ENTRY " if comp.is_entry else ""
    lines = [f"{prefix}%{comp.name} ({params}) -> {comp.root.shape.without_layout()} {{"]
    if comp.parent is not None and comp.parent.is_scheduled:
        instructions = comp.instructions
    elif orders is not None and id(comp) in orders:
        instructions = orders[id(comp)]
    else:
        instructions = comp.post_order()
    for instr in instructions:
        root = "ROOT " if instr is comp.root else ""
        lines.append("  " + root + instruction_to_text(instr, print_metadata=print_metadata))
    closing = "}"
    if comp.execution_thread:
        closing += f', execution_thread="{comp.execution_thread}"'
    lines.append(closing)
    return "\n".join(lines)


def instruction_to_text(instr: HloInstruction, *, print_metadata: bool = True) -> str:
    if instr.opcode == "parameter":
        inside = str(instr.parameter_number)
    elif instr.opcode == "constant":
        inside = "{...}" if instr.elided else format_literal(instr.literal, instr.shape)
    else:
        inside = ", ".join("%" + operand.name for operand in instr.operands)
    text = f"%{instr.name} = {instr.shape} {instr.opcode}({inside})"
    attrs = format_attrs(instr, print_metadata)
    return ", ".join([text, *attrs]) if attrs else text


def format_attrs(instr: HloInstruction, print_metadata: bool = True) -> list[str]:
    opdef = instr.opdef
    attrs = instr.attrs
    if not attrs and not instr.control_predecessors:
        return []
    out = []
    printed = opdef.printed_attrs
    for name in printed:
        if name in attrs and _printed(name, attrs[name]):
            out.append(f"{name}={attr_kind(name).format(attrs[name])}")
    for name, value in attrs.items():  # attributes the table does not list for this op
        if name not in printed and name not in GENERIC_ATTRS:
            out.append(f"{name}={attr_kind(name).format(value)}")
    for name in GENERIC_ATTRS:
        if name == "control-predecessors":
            if instr.control_predecessors:
                out.append(
                    "control-predecessors={"
                    + ", ".join("%" + p.name for p in instr.control_predecessors)
                    + "}"
                )
            continue
        if name == "metadata" and not print_metadata:
            continue
        if name in attrs and name not in opdef.attr_names:  # not printed above already
            out.append(f"{name}={attrs[name]}")
    return out


def _printed(name: str, value) -> bool:
    """XLA omits attributes at their default: false flags, group counts of 1, empty batch dims."""
    if value is False:
        return name in ("largest",)
    if name in ("feature_group_count", "batch_group_count") and value == 1:
        return False
    if (
        name
        in (
            "lhs_batch_dims",
            "rhs_batch_dims",
            "operand_batching_dims",
            "start_indices_batching_dims",
            "input_batching_dims",
            "scatter_indices_batching_dims",
        )
        and not value
    ):
        return False
    return True


def canonical_text(module: HloModule) -> str:
    """Text with instructions and computations renamed by position and metadata dropped: two
    modules that differ only in names print the same (the fingerprint's input)."""
    copy = module.clone()
    copy.name = "m"
    copy.stack_frame_text = ""
    for ci, comp in enumerate(copy.computation_post_order()):
        comp.name = "entry" if comp.is_entry else f"c{ci}"
        for ii, instr in enumerate(comp.post_order()):
            instr.name = f"{comp.name}.{ii}"
            instr.attrs.pop("metadata", None)
    return module_to_text(copy, print_metadata=False, print_stack_frames=False)
