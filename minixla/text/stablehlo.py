"""StableHLO, MHLO and CHLO (as read by minixla.text.mlir) into minixla's HLO IR.

`RULES` (minixla.text.stablehlo_rules) is the one table: each MLIR op name maps to the HLO opcode
it becomes and a function that converts its attributes; ops with regions or several results
name a `build_*` method of the Converter below instead. The
result shape of every instruction is the op's declared MLIR type, so the verifier checks the
conversion. Functions become computations (`func.call` becomes `call`); a `stablehlo.composite`
is replaced by its decomposition. Values a `case`/`while` region uses from the enclosing function
are passed in explicitly, as HLO needs.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import HloParseError
from ..ir.attrs import Raw
from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule, NameUniquer
from ..ir.sharding import sdy_meshes
from ..ir.shapes import Shape
from .chlo import decompose
from .stablehlo_distributed import DistributedOps
from .mlir import (
    AttrDict,
    Block,
    Dense,
    MlirFunc,
    MlirModule,
    MlirOp,
    Symbol,
    Word,
    dense_array,
)
from .stablehlo_rules import (
    API_VERSIONS,
    RULES,
    TERMINATORS,
    broadcast_attrs,
    ints,
    scatter_attrs,
    window_of,
    words_of,
)


def convert_module(mlir: MlirModule, source: str = "") -> HloModule:
    return Converter(mlir, source).run()


# -- the converter ---------------------------------------------------------------------------
class Scope:
    """Values visible in a region: `env` maps MLIR names to instructions (or packs)."""

    def __init__(self, comp: HloComputation, env: dict | None = None):
        self.comp = comp
        self.env: dict = dict(env or {})


class Converter(DistributedOps):
    def __init__(self, mlir: MlirModule, source: str):
        self.mlir = mlir
        self.lines = source.splitlines()
        self.module = HloModule(_hlo_name(mlir.name or "module"))
        self.names = NameUniquer()
        self.computation_names = NameUniquer()
        self.funcs: dict[str, HloComputation] = {}
        self.current: MlirOp | None = None  # the op being converted: its location goes on
        self.mesh_text = ", ".join(f"{n} = #sdy.mesh<{m}>" for n, m in mlir.meshes.items())
        self.meshes = sdy_meshes(self.mesh_text)

    def run(self) -> HloModule:
        entry_name = (
            "main"
            if "main" in self.mlir.funcs
            else next(
                (f.name for f in self.mlir.funcs.values() if f.visibility == "public"),
                next(iter(self.mlir.funcs)),
            )
        )
        entry = self.function(entry_name, entry=True)
        self.module.set_entry(entry)
        for key, hlo_key in (
            ("mhlo.num_partitions", "num_partitions"),
            ("mhlo.num_replicas", "replica_count"),
        ):
            count = self.mlir.attrs.get(key)
            if isinstance(count, int) and count > 1:
                self.module.header_attrs[hlo_key] = str(count)
        if self.mesh_text:  # where XLA's import puts Shardy's meshes
            self.module.header_attrs["frontend_attributes"] = (
                "{xla.sdy.meshes={" + self.mesh_text + "}}"
            )
        return self.module

    def error(self, op: MlirOp | MlirFunc, message: str) -> HloParseError:
        source = self.lines[op.line - 1] if 0 < op.line <= len(self.lines) else ""
        return HloParseError(message, op.line, op.column, source)

    # -- functions and regions ----------------------------------------------------------
    def function(self, name: str, entry: bool = False) -> HloComputation:
        if name in self.funcs:
            return self.funcs[name]
        func = self.mlir.funcs.get(name)
        if func is None:
            raise HloParseError(f"call to undefined function @{name}")
        comp = HloComputation(self.computation_names(_hlo_name(name)))
        self.funcs[name] = comp  # recursion is rejected by the verifier later
        scope = Scope(comp)
        for number, (arg, shape, attrs) in enumerate(func.args):
            param = self.add(
                scope, "parameter", shape, (), name=f"Arg_{number}", parameter_number=number
            )
            self.keep_sharding(param, attrs)
            scope.env[arg] = param
        results = self.block(func.body, scope)
        for i, attrs in enumerate(func.result_attrs[: len(results)]):
            results[i] = self.result_sharding(scope, results[i], attrs)
        root = self.pack(scope, results)
        comp.root = root
        self.module.add_computation(comp)
        return comp

    def block(self, block: Block, scope: Scope) -> list[HloInstruction]:
        for op in block.ops:
            if op.name in TERMINATORS:
                return [self.value(scope, name, op) for name in op.operands]
            self.operation(op, scope)
        raise HloParseError("a region ends without a return")

    def region_computation(
        self, block: Block, scope: Scope, name: str, arg_names=None
    ) -> HloComputation:
        """A region whose block arguments are the computation's parameters (reducers, ...)."""
        comp = HloComputation(self.computation_names(name))
        inner = Scope(comp)
        args = arg_names if arg_names is not None else block.args
        for number, (arg, shape) in enumerate(args):
            inner.env[arg] = self.add(
                inner, "parameter", shape, (), name=f"Arg_{number}", parameter_number=number
            )
        for free in free_values(block, {a for a, _ in args}):
            outer = self.value(scope, free, None)
            if outer.opcode != "constant":
                raise HloParseError(
                    f"region of {name} uses {free} from outside; only "
                    f"constants may be captured there"
                )
            inner.env[free] = self.add(inner, "constant", outer.shape, (), literal=outer.literal)
        comp.root = self.pack(inner, self.block(block, inner))
        self.module.add_computation(comp)
        return comp

    def captured_computation(
        self, block: Block, scope: Scope, name: str, args, captures, passthrough: bool
    ) -> HloComputation:
        """A region taking one tuple of (block arguments..., captured values...)."""
        comp = HloComputation(self.computation_names(name))
        inner = Scope(comp)
        shapes = [s for _, s in args] + [self.value(scope, c, None).shape for c in captures]
        param = self.add(
            inner, "parameter", Shape.tuple_of(shapes), (), name="Arg_tuple", parameter_number=0
        )
        names = [a for a, _ in args] + list(captures)
        elements = [
            self.add(inner, "get-tuple-element", shape, (param,), {"index": i})
            for i, shape in enumerate(shapes)
        ]
        inner.env.update(zip(names, elements))
        results = self.block(block, inner)
        if passthrough:
            results = results + elements[len(args) :]
            comp.root = self.add(inner, "tuple", Shape.tuple_of(r.shape for r in results), results)
        else:
            comp.root = self.pack(inner, results)
        self.module.add_computation(comp)
        return comp

    # -- values ---------------------------------------------------------------------------
    def value(self, scope: Scope, name: str, op: MlirOp | None) -> HloInstruction:
        found = scope.env.get(name)
        if isinstance(found, tuple):  # (pack, index): a result of a multi-result op
            pack, index = found
            found = self.add(
                scope,
                "get-tuple-element",
                pack.shape.tuple_shapes[index],
                (pack,),
                {"index": index},
            )
            scope.env[name] = found
        if found is None:
            message = f"use of undefined value {name}"
            raise self.error(op, message) if op is not None else HloParseError(message)
        return found

    def add(
        self,
        scope: Scope,
        opcode: str,
        shape: Shape,
        operands,
        attrs=None,
        *,
        name: str = "",
        **fields,
    ) -> HloInstruction:
        shape = shape.with_default_layout()
        instr = HloInstruction(
            opcode, shape, operands, attrs, name=self.names(name or opcode), **fields
        )
        if self.current is not None:
            instr.location = (self.current.line, self.current.column)
        scope.comp.add_instruction(instr)
        return instr

    def pack(self, scope: Scope, values: list[HloInstruction]) -> HloInstruction:
        if len(values) == 1:
            return values[0]
        return self.add(scope, "tuple", Shape.tuple_of(v.shape for v in values), values)

    def bind(self, op: MlirOp, scope: Scope, result: HloInstruction | list) -> None:
        """Gives the op's result names their instructions (get-tuple-element on demand)."""
        if isinstance(result, list):
            if len(result) != len(op.results):
                raise self.error(
                    op, f"{op.name} gives {len(result)} results, the text names {len(op.results)}"
                )
            scope.env.update(zip(op.results, result))
        elif len(op.results) == 1:
            scope.env[op.results[0]] = result
        else:
            for i, name in enumerate(op.results):
                scope.env[name] = (result, i)

    def result_shape(self, op: MlirOp) -> Shape:
        types = op.out_types
        if not types:
            raise self.error(op, f"{op.name} has no result type")
        return types[0] if len(types) == 1 else Shape.tuple_of(types)

    def operands(self, op: MlirOp, scope: Scope) -> list[HloInstruction]:
        names = list(op.operands)
        for group in op.groups:
            names.extend(item for item in group if isinstance(item, str))
        return [self.value(scope, n, op) for n in names]

    # -- ops ------------------------------------------------------------------------------
    def operation(self, op: MlirOp, scope: Scope) -> None:
        rule = RULES.get(op.name)
        if rule is None:
            raise self.error(op, f"unsupported MLIR op '{op.name}'")
        outer, self.current = self.current, op
        try:
            if rule.build:
                result = getattr(self, "build_" + rule.build)(op, scope, rule)
            else:
                operands = self.operands(op, scope)
                attrs = rule.attrs(op, operands) if rule.attrs else {}
                result = self.add(scope, rule.opcode, self.result_shape(op), operands, attrs)
                self.keep_op_attrs(result, op)
        except HloParseError as exc:
            if exc.line:
                raise
            raise self.error(op, f"{op.name}: {exc.reason}") from None
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, StopIteration) as exc:
            raise self.error(op, f"cannot convert {op.name}: {exc}") from None
        finally:
            self.current = outer
        self.bind(op, scope, result)

    def build_constant(self, op, scope, rule):
        dense = op.get("value")
        if dense is None:
            dense = next((w for w in op.words if isinstance(w, Dense)), None)
        if dense is None:
            raise self.error(op, "stablehlo.constant without a dense<...> value")
        shape = self.result_shape(op) if op.out_types else dense.shape
        if isinstance(dense.body, tuple) and dense.body[0] == "resource":
            blob = self.mlir.resources.get(dense.body[1])
            if blob is None:
                raise self.error(op, f"dense_resource {dense.body[1]} is not defined")
            dense = Dense(blob, shape, op.line, op.column)
        return self.add(scope, "constant", shape, (), literal=dense_array(dense, shape))

    def build_broadcast_in_dim(self, op, scope, rule):
        """StableHLO may stretch a size-1 operand dim; HLO reshapes those away first."""
        (operand,) = self.operands(op, scope)
        shape = self.result_shape(op)
        dims = broadcast_attrs(op, [operand])["dimensions"]
        keep = [
            i for i, d in enumerate(dims) if not (operand.shape.dims[i] == 1 and shape.dims[d] != 1)
        ]
        if len(keep) != len(dims):
            squeezed = operand.shape.with_dims([operand.shape.dims[i] for i in keep])
            operand = self.add(scope, "reshape", squeezed, [operand])
            dims = tuple(dims[i] for i in keep)
        return self.add(scope, "broadcast", shape, [operand], {"dimensions": dims})

    def build_packed(self, op, scope, rule):
        operands = self.operands(op, scope)
        attrs = rule.attrs(op, operands) if rule.attrs else {}
        return self.add(scope, rule.opcode, self.result_shape(op), operands, attrs)

    def build_packed_operands(self, op, scope, rule):
        operands = self.operands(op, scope)
        packed = self.pack(scope, operands) if len(operands) != 1 else operands[0]
        if len(operands) == 1:
            return self.add(scope, rule.opcode, packed.shape, [packed])
        return self.add(scope, rule.opcode, packed.shape, [packed])

    def build_reduce(self, op, scope, rule):
        if op.groups:  # (%x init: %c), (%y init: %d)
            inputs = [g[0] for g in op.groups]
            inits = [
                next(v for tag, v in (i for i in g if isinstance(i, tuple)) if tag == "init")
                for g in op.groups
            ]
            names = inputs + inits
        else:
            names = list(op.operands)
        operands = [self.value(scope, n, op) for n in names]
        dims = {"dimensions": tuple(ints(op.get("dimensions")))}
        shape = self.result_shape(op)
        if op.regions:
            reducer = self.region_computation(op.regions[0], scope, "region")
        else:  # `applies stablehlo.add`
            words = words_of(op)
            reducer = self.binary_computation(
                words[words.index("applies") + 1], operands[len(operands) // 2].shape
            )
        return self.add(scope, "reduce", shape, operands, {**dims, "to_apply": reducer})

    def binary_computation(self, op_name: str, scalar: Shape) -> HloComputation:
        rule = RULES.get(op_name)
        if rule is None or rule.build or rule.attrs:
            raise HloParseError(f"reduce applies unsupported op {op_name}")
        comp = HloComputation(self.computation_names(rule.opcode))
        inner = Scope(comp)
        lhs = self.add(inner, "parameter", scalar, (), name="Arg_0", parameter_number=0)
        rhs = self.add(inner, "parameter", scalar, (), name="Arg_1", parameter_number=1)
        comp.root = self.add(inner, rule.opcode, scalar, (lhs, rhs))
        self.module.add_computation(comp)
        return comp

    def build_reduce_window(self, op, scope, rule):
        operands = self.operands(op, scope)
        sizes = ints(op.get("window_dimensions"))
        window = window_of(
            sizes,
            op.get("window_strides"),
            op.get("padding"),
            op.get("base_dilations"),
            op.get("window_dilations"),
        )
        reducer = self.region_computation(op.regions[0], scope, "region")
        return self.add(
            scope,
            "reduce-window",
            self.result_shape(op),
            operands,
            {"window": window, "to_apply": reducer},
        )

    def build_select_and_scatter(self, op, scope, rule):
        operands = self.operands(op, scope)
        window = window_of(
            ints(op.get("window_dimensions")), op.get("window_strides"), op.get("padding")
        )
        select = self.region_computation(op.regions[0], scope, "select")
        scatter = self.region_computation(op.regions[1], scope, "scatter")
        return self.add(
            scope,
            "select-and-scatter",
            self.result_shape(op),
            operands,
            {"window": window, "select": select, "scatter": scatter},
        )

    def build_sort(self, op, scope, rule):
        operands = self.operands(op, scope)
        comparator = self.region_computation(op.regions[0], scope, "compare")
        attrs = {
            "dimensions": (int(op.get("dimension", default=-1)),),
            "is_stable": bool(op.get("is_stable", default=False)),
            "to_apply": comparator,
        }
        if attrs["dimensions"][0] < 0:
            attrs["dimensions"] = (operands[0].shape.rank - 1,)
        return self.add(scope, "sort", self.result_shape(op), operands, attrs)

    def build_scatter(self, op, scope, rule):
        operands = self.operands(op, scope)
        update = self.region_computation(op.regions[0], scope, "region")
        return self.add(
            scope,
            "scatter",
            self.result_shape(op),
            operands,
            {**scatter_attrs(op), "to_apply": update},
        )

    def build_map(self, op, scope, rule):
        operands = self.operands(op, scope)
        fn = self.region_computation(op.regions[0], scope, "region")
        return self.add(
            scope,
            "map",
            self.result_shape(op),
            operands,
            {"dimensions": tuple(ints(op.get("dimensions"))), "to_apply": fn},
        )

    def build_while_(self, op, scope, rule):
        if op.groups:  # while(%iterArg = %init, ...) : types
            arg_names = group_bindings(op.groups[0])
            init_names = group_uses(op.groups[0])
        else:
            init_names = list(op.operands)
            arg_names = [a for a, _ in op.regions[0].args]
        inits = [self.value(scope, n, op) for n in init_names]
        args = [(name, init.shape) for name, init in zip(arg_names, inits)]
        cond_block, body_block = op.regions[0], op.regions[1]
        bound = set(arg_names) | {a for a, _ in cond_block.args} | {a for a, _ in body_block.args}
        captures = [
            n
            for n in dict.fromkeys(free_values(cond_block, bound) + free_values(body_block, bound))
        ]
        cond_args = list(zip([a for a, _ in cond_block.args] or arg_names, [s for _, s in args]))
        body_args = list(zip([a for a, _ in body_block.args] or arg_names, [s for _, s in args]))
        cond = self.captured_computation(
            cond_block, scope, "region_cond", cond_args, captures, passthrough=False
        )
        body = self.captured_computation(
            body_block, scope, "region_body", body_args, captures, passthrough=True
        )
        state = inits + [self.value(scope, c, op) for c in captures]
        init = self.add(scope, "tuple", Shape.tuple_of(s.shape for s in state), state)
        loop = self.add(scope, "while", init.shape, [init], {"condition": cond, "body": body})
        return [
            self.add(scope, "get-tuple-element", loop.shape.tuple_shapes[i], (loop,), {"index": i})
            for i in range(len(inits))
        ]

    def branch_computations(self, op, scope, name):
        comps, operands = [], []
        for i, block in enumerate(op.regions):
            captures = free_values(block, set())
            comps.append(
                self.captured_computation(
                    block, scope, f"{name}_{i}", [], captures, passthrough=False
                )
            )
            values = [self.value(scope, c, op) for c in captures]
            operands.append(
                self.add(scope, "tuple", Shape.tuple_of(v.shape for v in values), values)
            )
        return comps, operands

    def build_case(self, op, scope, rule):
        index = self.value(scope, op.operands[0], op)
        comps, operands = self.branch_computations(op, scope, "branch")
        return self.add(
            scope,
            "conditional",
            self.result_shape(op),
            [index] + operands,
            {"branch_computations": comps},
        )

    def build_if_(self, op, scope, rule):
        pred = self.value(scope, op.operands[0], op)
        comps, operands = self.branch_computations(op, scope, "branch")
        return self.add(
            scope,
            "conditional",
            self.result_shape(op),
            [pred] + operands,
            {"true_computation": comps[0], "false_computation": comps[1]},
        )

    def build_call(self, op, scope, rule):
        callee = next((w for w in op.words if isinstance(w, Symbol)), op.get("callee"))
        if not isinstance(callee, Symbol):
            raise self.error(op, f"{op.name} names no function to call")
        callee = callee.name
        operands = self.operands(op, scope)
        comp = self.function(callee)
        return self.add(
            scope,
            "call",
            self.result_shape(op) if op.out_types else comp.root.shape,
            operands,
            {"to_apply": comp},
        )

    def build_composite(self, op, scope, rule):
        """Inlines the decomposition: its ops are emitted here with the operands bound."""
        target = op.get("decomposition")
        if not isinstance(target, Symbol) or target.name not in self.mlir.funcs:
            raise self.error(op, "stablehlo.composite needs decomposition = @function")
        func = self.mlir.funcs[target.name]
        operands = self.operands(op, scope)
        inner = Scope(scope.comp, {arg: value for (arg, _, _), value in zip(func.args, operands)})
        return self.block(func.body, inner)

    def build_custom_call(self, op, scope, rule):
        target = next(
            (w.name for w in op.words if isinstance(w, Symbol)), op.get("call_target_name")
        )
        operands = self.operands(op, scope)
        if target == "ApproxTopK":
            return self.approx_top_k(op, scope, operands)
        attrs = {"custom_call_target": str(target)}
        version = op.get("api_version")
        if version is not None:
            attrs["api_version"] = (
                API_VERSIONS.get(int(version), "API_VERSION_ORIGINAL")
                if not isinstance(version, Word)
                else version.text
            )
        if op.get("has_side_effect"):
            attrs["custom_call_has_side_effect"] = True
        config = op.get("mhlo.backend_config")
        if isinstance(config, AttrDict):
            attrs["backend_config"] = Raw(config.raw)
        elif op.get("backend_config"):
            text = op.get("backend_config")
            attrs["backend_config"] = Raw(
                text.raw
                if isinstance(text, AttrDict)
                else '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'
            )
        called = op.get("called_computations")
        if called:
            attrs["called_computations"] = [self.function(s.name) for s in called]
        # a call made for its effect only (`-> ()`) returns the empty tuple
        shape = self.result_shape(op) if op.out_types else Shape.tuple_of([])
        result = self.add(scope, "custom-call", shape, operands, attrs)
        self.keep_op_attrs(result, op)
        return result

    def approx_top_k(self, op, scope, operands):
        """jax.lax.approx_max_k's custom call. XLA:CPU computes it exactly (the sort XLA's
        import writes for is_fallback): the inputs sorted along reduction_dim by the called
        comparator, the first k of each (k: the result's size) kept."""
        config = op.get("mhlo.backend_config")
        called = op.get("called_computations") or []
        if not isinstance(config, AttrDict) or len(called) != 1 or len(operands) % 2:
            raise self.error(
                op,
                "ApproxTopK needs inputs and init values, a comparator in "
                "called_computations and reduction_dim in mhlo.backend_config",
            )
        inputs = operands[: len(operands) // 2]
        dim = int(config.get("reduction_dim", inputs[0].shape.rank - 1))
        sort = self.add(
            scope,
            "sort",
            Shape.tuple_of(x.shape for x in inputs),
            inputs,
            {"dimensions": (dim,), "is_stable": False, "to_apply": self.function(called[0].name)},
        )
        results = []
        for i, want in enumerate(op.out_types):
            whole = self.add(scope, "get-tuple-element", inputs[i].shape, (sort,), {"index": i})
            ranges = tuple((0, n, 1) for n in want.dims)
            results.append(self.add(scope, "slice", want, [whole], {"slice": ranges}))
        return results

    def build_identity(self, op, scope, rule):
        """Ops that pass their operands on (sdy.propagation_barrier, sdy.data_flow_edge)."""
        operands = self.operands(op, scope)
        return operands if len(operands) > 1 else operands[0]

    def build_nothing(self, op, scope, rule):
        """Ops with no result and no effect on values (sdy.sharding_group)."""
        return []

    # -- CHLO decompositions --------------------------------------------------------------
    def build_chlo(self, op, scope, rule):
        """lgamma, erfc, zeta, ...: the HLO arithmetic of minixla.text.chlo."""
        operands = self.operands(op, scope)

        def emit(opcode, shape, args, attrs, **fields):
            return self.add(scope, opcode, shape, args, attrs, **fields)

        return decompose(op.name, emit, operands)

    def build_is_inf(self, op, scope, rule):
        (x,) = self.operands(op, scope)
        shape = self.result_shape(op)
        inf = self.splat(scope, x.shape, np.inf)
        if op.name == "chlo.is_inf":
            x = self.add(scope, "abs", x.shape, [x])
        elif op.name == "chlo.is_neg_inf":
            x = self.add(scope, "negate", x.shape, [x])
        return self.add(scope, "compare", shape, [x, inf], {"direction": "EQ"})

    def build_conj(self, op, scope, rule):
        (x,) = self.operands(op, scope)
        if not x.shape.element_type.is_complex:
            return x
        part = x.shape.with_dtype("f64" if x.shape.dtype == "c128" else "f32")
        real = self.add(scope, "real", part, [x])
        imag = self.add(scope, "negate", part, [self.add(scope, "imag", part, [x])])
        return self.add(scope, "complex", x.shape, [real, imag])

    def build_square(self, op, scope, rule):
        (x,) = self.operands(op, scope)
        return self.add(scope, "multiply", x.shape, [x, x])

    def splat(self, scope, shape: Shape, value) -> HloInstruction:
        scalar = Shape.array(shape.element_type, ())
        const = self.add(scope, "constant", scalar, (), literal=np.array(value, shape.numpy_dtype))
        if not shape.dims:
            return const
        return self.add(scope, "broadcast", shape, [const], {"dimensions": ()})


def group_bindings(group: list) -> list[str]:
    """The names a `(%iterArg = %init, ...)` group binds: block arguments, not uses."""
    return [
        item
        for item, after in zip(group, group[1:])
        if isinstance(item, str) and isinstance(after, tuple) and after[0] == "="
    ]


def group_uses(group: list) -> list[str]:
    """The values a parenthesized group reads: `%x`, `init: %c`, the `%init` of `%a = %init`."""
    bound = set(group_bindings(group))
    uses = [item for item in group if isinstance(item, str) and item not in bound]
    uses += [
        item[1]
        for item in group
        if isinstance(item, tuple) and isinstance(item[1], str) and item[1].startswith("%")
    ]
    return uses


def free_values(block: Block, bound: set) -> list[str]:
    """Names a region uses but neither defines nor receives, in order of first use."""
    defined = set(bound) | {a for a, _ in block.args}
    used: list[str] = []

    def walk(ops, defined):
        for op in ops:
            names = list(op.operands) + [n for g in op.groups for n in group_uses(g)]
            for name in names:
                if name not in defined and name not in used:
                    used.append(name)
            for region in op.regions:
                inner = defined | {a for a, _ in region.args}
                inner |= {n for g in op.groups for n in group_bindings(g)}
                walk(region.ops, inner)
            defined = defined | set(op.results)

    walk(block.ops, defined)
    return used


def _hlo_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name) or "f"


def parse_mlir_module(text: str, *, verify: bool = True) -> HloModule:
    """StableHLO/MHLO text into an HloModule (verified unless `verify=False`)."""
    from .mlir import parse_mlir

    module = convert_module(parse_mlir(text), text)
    if verify:
        from ..ir.verifier import verify as verify_module

        verify_module(module)
    return module


__all__ = ["convert_module", "free_values", "parse_mlir_module"]
