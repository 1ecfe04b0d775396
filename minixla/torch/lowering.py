"""FX graph -> HloModule: walks an ATen-level torch.fx graph (what AOTAutograd gives after the
core-ATen decompositions) in order and emits each node through its rule in `LOWERINGS`.

Shapes and dtypes come from each node's `meta["val"]` (the fake tensor AOTAutograd traced),
so rules never re-derive torch's type promotion or broadcasting. Graph inputs become entry
parameters (non-tensor inputs are baked in as the concrete values traced); the entry returns
a tuple of the tensor outputs, and `GraphSignature` says where the non-tensor outputs go.
"""

from __future__ import annotations

import operator
import os
import re
from dataclasses import dataclass, field

import torch

from ..errors import MinixlaError, UnsupportedError
from ..frontend.builder import Builder, XlaOp
from .convert import hlo_dtype


class TorchLoweringError(UnsupportedError):
    """An ATen op (or a use of one) minixla cannot lower; names the op and the user's line."""


@dataclass
class GraphSignature:
    """How the compiled module's flat tensor results map back to the FX graph's outputs:
    `outputs[i]` is the index into the HLO result tuple, ("input", i) for a graph input
    returned as it is (the caller's own tensor, as eager PyTorch and Inductor return it:
    forward graphs hand their inputs to the backward graph this way, and a copy would cost
    a parameter's size every call), or ("const", value) for None and Python numbers.
    `tensor_inputs` lists which graph inputs are module parameters; `needs_rng` adds a
    last parameter, a fresh u64[2] random state for every call."""

    tensor_inputs: list[int] = field(default_factory=list)
    outputs: list = field(default_factory=list)
    needs_rng: bool = False


class LoweringContext:
    """What a rule sees: the builder and the node being lowered (with its traced value)."""

    def __init__(self, builder: Builder, signature: GraphSignature):
        self.builder = builder
        self.signature = signature
        self.node: torch.fx.Node | None = None
        self._rng_state: XlaOp | None = None

    def random_bits(self, dims) -> XlaOp:
        """u32 random bits of shape `dims` from the per-call random state parameter (created
        on first use, after the tensor inputs); each use advances the state."""
        from ..frontend import ops as xo

        if self._rng_state is None:
            self._rng_state = self.builder.parameter(("u64", (2,)), "rng_state")
            self.signature.needs_rng = True
        out = xo.RngBitGenerator("rng_default", self._rng_state, ("u32", tuple(dims)))
        self._rng_state = xo.GetTupleElement(out, 0)
        return xo.GetTupleElement(out, 1)

    @property
    def val(self):
        return self.node.meta.get("val")

    def out_dims(self, index: int | None = None) -> tuple[int, ...]:
        val = self.val if index is None else self.val[index]
        return tuple(int(d) for d in val.shape)

    def out_dtype(self, index: int | None = None) -> str:
        val = self.val if index is None else self.val[index]
        return hlo_dtype(val.dtype)

    def fail(self, reason: str) -> TorchLoweringError:
        return lowering_error(self.node, reason)


def lowering_error(node: torch.fx.Node, reason: str) -> TorchLoweringError:
    where = user_line(node)
    prefix = f"{where}: " if where else ""
    return TorchLoweringError(f"{prefix}{node.target}: {reason}")


def user_line(node: torch.fx.Node) -> str:
    """`file:line` of the user's code that produced `node`: the innermost frame of dynamo's
    stack trace outside torch itself (else the innermost frame)."""
    trace = node.meta.get("stack_trace") or ""
    found = re.findall(r'File "([^"]+)", line (\d+)', trace)
    outside = [f for f in found if not f[0].startswith(_TORCH_DIR)]
    frame = (outside or found or [None])[-1]
    return f"{frame[0]}:{frame[1]}" if frame else ""


_TORCH_DIR = os.path.dirname(torch.__file__)


def lower_graph(gm: torch.fx.GraphModule, example_inputs, name: str = "torch_graph"):
    """(HloModule, GraphSignature) for `gm`; raises TorchLoweringError naming the first
    node that has no rule or that its rule rejects."""
    from .aten import LOWERINGS

    builder = Builder("main")
    signature = GraphSignature()
    ctx = LoweringContext(builder, signature)
    env: dict[torch.fx.Node, object] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for number, (node, example) in enumerate(zip(placeholders, example_inputs)):
        if isinstance(example, torch.Tensor):
            dims = tuple(int(d) for d in example.shape)
            env[node] = builder.parameter((hlo_dtype(example.dtype), dims), _identifier(node.name))
            signature.tensor_inputs.append(number)
        else:
            env[node] = example
    results: list[XlaOp] = []
    for node in gm.graph.nodes:
        if node.op == "call_function":
            ctx.node = node
            env[node] = _lower_node(ctx, node, env, LOWERINGS)
        elif node.op == "get_attr":  # a tensor the graph holds (torch.tensor(...) in forward)
            env[node] = _constant(builder, node, operator.attrgetter(node.target)(gm))
        elif node.op == "output":
            for item in _flat_outputs(node.args[0]):
                value = env[item] if isinstance(item, torch.fx.Node) else item
                if (
                    isinstance(item, torch.fx.Node)
                    and item.op == "placeholder"
                    and isinstance(value, XlaOp)
                ):  # the input itself, not a rule's result that equals it (a clone)
                    signature.outputs.append(("input", placeholders.index(item)))
                elif isinstance(value, XlaOp):
                    signature.outputs.append(len(results))
                    results.append(value)
                else:
                    signature.outputs.append(("const", value))
        elif node.op != "placeholder":
            raise lowering_error(node, f"FX node kind {node.op!r} is not supported")
    module = builder.module(results, name=_identifier(name))
    return module, signature


def _constant(builder: Builder, node: torch.fx.Node, value) -> XlaOp:
    if not isinstance(value, torch.Tensor):
        raise lowering_error(node, f"graph attribute of type {type(value).__name__}")
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from .convert import to_numpy

    hlo_dtype(value.dtype)  # raises for dtypes HLO has no type for
    with unset_fake_temporarily():  # compilers run under AOTAutograd's fake mode
        return builder.constant(to_numpy(value).copy())  # a copy: later writes cannot reach it


def _lower_node(ctx: LoweringContext, node, env, table):
    args = torch.fx.node.map_arg(node.args, lambda n: env[n])
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
    if node.target is operator.getitem:
        return args[0][args[1]]
    if node.target in PYTHON_OPS:  # shape arithmetic on concrete ints
        return node.target(*args, **kwargs)
    rule = table.get(node.target)
    if rule is None:
        raise lowering_error(
            node,
            "no minixla lowering rule for this ATen op; pass "
            "options={'fallback': 'eager'} to run such graphs eagerly",
        )
    try:
        return rule(ctx, *args, **kwargs)
    except TorchLoweringError:
        raise
    except MinixlaError as exc:
        raise lowering_error(node, str(exc)) from None
    except Exception as exc:  # a rule meeting arguments it does not handle
        raise lowering_error(node, f"lowering failed: {type(exc).__name__}: {exc}") from exc


PYTHON_OPS = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.floordiv,
    operator.truediv,
    operator.neg,
    operator.mod,
    operator.eq,
    operator.ne,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    torch.sym_int,
    torch.sym_float,
    torch.sym_max,
    torch.sym_min,
}


def _flat_outputs(value):
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _flat_outputs(item)
    else:
        yield value


def _identifier(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "graph"
