"""Parser for XLA's HLO text.

Grammar (see xla-reference.md section 1 for the full story):

    hlo_text     := ['HloModule' name (',' ATTR value)*] [stack_frame_tables] computation+
    computation  := ['ENTRY'] name [param_sig] '{' instruction+ '}' [',' 'execution_thread=' STRING]
    param_sig    := '(' [NAME shape (',' NAME shape)*] ')' '->' shape
    instruction  := ['ROOT'] name '=' [shape] opcode '(' operands ')' (',' ATTR value)*
    operand      := [shape] name | [shape] opcode '(' operands ')'      (nested, anonymous)
    shape        := type '[' [dim (',' dim)*] ']' [layout] | '(' [shape (',' shape)*] ')'
    dim          := INT | '<=' INT | '?'

Attribute values are read by the attribute's kind (minixla.ir.attrs). An attribute the opcode
does not take is an error; with `strict=False` it is kept verbatim and listed in the module's
`unknown_attributes`. Every malformed input raises HloParseError with line, column and a caret.
"""

from __future__ import annotations

from ..errors import HloParseError
from ..ir.attrs import Window, attr_kind, parse_dim_labels
from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import AliasEntry, HloModule, NameUniquer, ProgramShape
from ..ir.opcodes import ASYNC_SUFFIXES, OPCODES
from ..ir.shape_rules_base import same
from ..ir.shapes import Shape
from .async_sugar import AsyncSugar
from .lexer import ATTR, EOF, IDENT, INT, NAME, STRING
from .literals import ELIDED, parse_literal, zeros_like_shape
from .values import ValueParser, _describe

_STACK_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def parse_hlo_module(text: str, *, verify: bool = True, strict: bool = True) -> HloModule:
    """Parses HLO text (a module, or headerless computations) into an HloModule.

    `strict=False` keeps attributes the opcode does not take (as raw text) instead of failing,
    and lists them in `module.unknown_attributes` as `LINE:COL: opcode name: attribute`.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_hlo_module expects str, got {type(text).__name__}")
    parser = Parser(text, strict=strict)
    try:
        module = parser.parse_module()
    except HloParseError:
        raise
    except RecursionError:
        raise parser.lexer.error("input is nested too deeply") from None
    except (ValueError, KeyError, IndexError, TypeError, OverflowError) as exc:
        raise parser.lexer.error(f"invalid input: {exc}") from None
    if verify:
        from ..ir.verifier import verify as verify_module

        verify_module(module)
    return module


def parse_shape(text: str) -> Shape:
    parser = Parser(text)
    shape = parser.parse_shape()
    parser.expect_kind(EOF)
    return shape


class Parser(ValueParser):
    def __init__(self, text: str, strict: bool = True):
        super().__init__(text)
        self.strict = strict
        self.unknown_attributes: list[str] = []
        # None: a name taken by an inline computation still being parsed
        self.computations: dict[str, HloComputation | None] = {}
        self.scope: dict[str, HloInstruction] = {}  # names in the current computation
        self.instruction_names = NameUniquer()
        self.anonymous = 0
        self.inline_computations: list[HloComputation] = []
        self.async_sugar = AsyncSugar(self)

    # -- module ---------------------------------------------------------------------------
    def parse_module(self) -> HloModule:
        module = HloModule("")
        token = self.peek()
        if token.kind == IDENT and token.text == "HloModule":
            self.next()
            if self.peek().kind == NAME:  # `HloModule name:` as some of XLA's tests write it
                module.name = self.next().text
            else:
                module.name = self.expect_kind(IDENT, "a module name").text
            while self.accept(","):
                self.parse_module_attr(module)
        module.stack_frame_text = self.parse_stack_frame_tables()
        entry = None
        while self.peek().kind != EOF:
            comp, is_entry = self.parse_computation()
            for inline in self.inline_computations:
                module.add_computation(inline)
            self.inline_computations.clear()
            module.add_computation(comp)
            if is_entry:
                if entry is not None:
                    raise self.error("more than one ENTRY computation")
                entry = comp
        if not module.computations:
            raise self.error("expected at least one computation")
        module.set_entry(entry or module.computations[-1])
        module.unknown_attributes = self.unknown_attributes
        self.async_sugar.finish()
        _fill_missing_layouts(module)
        if not module.name:
            module.name = "module_" + module.entry.name
        return module

    def parse_module_attr(self, module: HloModule) -> None:
        token = self.expect_kind(ATTR, "a module attribute")
        name = token.text
        if name in module.header_attrs or (
            name == "entry_computation_layout" and module.entry_computation_layout
        ):
            raise self.error(f"duplicate module attribute {name}", token.start)
        if name == "is_scheduled":
            module.is_scheduled = self.parse_bool()
        elif name == "entry_computation_layout":
            module.entry_computation_layout = self.parse_program_shape()
        elif name == "input_output_alias":
            module.input_output_alias = self.parse_alias_config()
        elif name == "buffer_donor":
            module.buffer_donors = self.parse_buffer_donors()
        else:
            module.header_attrs[name] = self.lexer.raw_span()

    def parse_program_shape(self) -> ProgramShape:
        self.expect("{")
        self.expect("(")
        params = []
        if not self.peek().is_punct(")"):
            params.append(self.parse_shape())
            while self.accept(","):
                params.append(self.parse_shape())
        self.expect(")")
        self.expect("->")
        result = self.parse_shape()
        self.expect("}")
        return ProgramShape(tuple(params), result)

    def parse_alias_config(self) -> list[AliasEntry]:
        entries: list[AliasEntry] = []
        self.expect("{")
        while not self.peek().is_punct("}"):
            if entries:
                self.expect(",")
            output_index = tuple(self.parse_int_list())
            self.expect(":")
            if self.peek().kind == INT:  # short form `{}: 0`
                entries.append(AliasEntry(output_index, self.parse_int()))
                continue
            self.expect("(")
            number = self.parse_int()
            self.expect(",")
            param_index = tuple(self.parse_int_list())
            kind = "may-alias"
            if self.accept(","):
                kind = self.expect_kind(IDENT, "may-alias or must-alias").text
                if kind not in ("may-alias", "must-alias"):
                    raise self.error(f"unknown alias kind {kind}")
            self.expect(")")
            entries.append(AliasEntry(output_index, number, param_index, kind))
        self.expect("}")
        return entries

    def parse_buffer_donors(self) -> list[tuple[int, tuple[int, ...]]]:
        donors: list[tuple[int, tuple[int, ...]]] = []
        self.expect("{")
        while not self.peek().is_punct("}"):
            if donors:
                self.expect(",")
            self.expect("(")
            number = self.parse_int()
            self.expect(",")
            donors.append((number, tuple(self.parse_int_list())))
            self.expect(")")
        self.expect("}")
        return donors

    def parse_stack_frame_tables(self) -> str:
        start = None
        while self.peek().kind == IDENT and self.peek().text in _STACK_TABLES:
            token = self.next()
            start = token.start if start is None else start
            while self.peek().kind == INT:
                self.next()
                if self.peek().kind == STRING:
                    self.next()
                elif self.peek().is_punct("{"):
                    self.lexer.raw_span()
                else:
                    raise self.error("expected a string or {...} in a stack-frame table")
        if start is None:
            return ""
        return self.lexer.text[start : self.lexer.pos].strip()

    # -- computations ---------------------------------------------------------------------
    def parse_computation(self) -> tuple[HloComputation, bool]:
        is_entry = False
        token = self.peek()
        if token.kind == IDENT and token.text == "ENTRY":
            self.next()
            is_entry = True
        name_token = self.expect_kind(IDENT, "a computation name")
        name = name_token.text
        if name in self.computations:
            raise self.error(f"computation {name} is defined twice", name_token.start)
        signature = self.parse_param_signature() if self.peek().is_punct("(") else None
        comp = self.parse_computation_body(name)
        if signature is not None and not signature.compatible(comp.root.shape):
            raise self.error(
                f"computation {name} returns {signature} in its signature, but "
                f"its root is {comp.root.shape}",
                name_token.start,
            )
        if self.peek().is_punct(",") and self.lookahead(1).kind == ATTR:
            self.next()
            attr = self.expect_kind(ATTR)
            if attr.text != "execution_thread":
                raise self.error(f"unknown computation attribute {attr.text}", attr.start)
            comp.execution_thread = self.parse_string()
        self.computations[name] = comp
        return comp, is_entry

    def parse_param_signature(self) -> Shape:
        """`(name: shape, ...) -> shape`; returns the result shape."""
        self.expect("(")
        while not self.peek().is_punct(")"):
            if not self.peek().kind == NAME:
                raise self.error(f"expected a parameter name, found {_describe(self.peek())}")
            self.next()
            self.parse_shape()
            if not self.accept(","):
                break
        self.expect(")")
        self.expect("->")
        return self.parse_shape()

    def parse_computation_body(self, name: str) -> HloComputation:
        outer_scope = self.scope
        self.scope = {}
        comp = HloComputation(name)
        self.expect("{")
        root = None
        while not self.peek().is_punct("}"):
            instr, is_root = self.parse_instruction(comp)
            if is_root:
                if root is not None:
                    raise self.error(f"computation {name} has two ROOT instructions")
                root = instr
        self.expect("}")
        if not comp.instructions:
            raise self.error(f"computation {name} has no instructions")
        comp.root = root or comp.instructions[-1]
        for instr in comp.instructions:  # module-wide unique names, as XLA does
            instr.name = self.instruction_names(instr.name)
        self.scope = outer_scope
        return comp

    # -- instructions ---------------------------------------------------------------------
    def parse_instruction(self, comp: HloComputation) -> tuple[HloInstruction, bool]:
        is_root = False
        token = self.peek()
        if token.kind == IDENT and token.text == "ROOT":
            self.next()
            is_root = True
        if self.peek().kind == ATTR:  # `%name=opcode(...)`: the lexer took the `=` already
            name_token = self.next()
        else:
            name_token = self.expect_kind(IDENT, "an instruction name")
            self.expect("=")
        if name_token.text in self.scope:
            raise self.error(
                f"instruction name {name_token.text} is defined twice", name_token.start
            )
        instr = self.parse_instruction_rhs(comp, name_token.text)
        instr.location = self.lexer.location(name_token.start)[:2]
        self.scope[name_token.text] = instr
        return instr, is_root

    def parse_instruction_rhs(
        self, comp: HloComputation, name: str, declared: Shape | None = None
    ) -> HloInstruction:
        """Everything after `name =`; a nested operand passes the shape it already read."""
        shape = declared
        if shape is None and self.at_shape():
            shape = self.parse_shape()
        op_token = self.expect_kind(IDENT, "an opcode")
        opcode = op_token.text
        if opcode not in OPCODES:
            stem, suffix = _async_sugar(opcode)
            if stem is None:
                raise self.error(f"unknown opcode '{opcode}'", op_token.start)
            return self.async_sugar.parse(comp, name, shape, stem, suffix, op_token)
        opdef = OPCODES[opcode]
        # a shape left out of the text is None until inferred below
        instr = HloInstruction(opcode, shape, name=name)  # type: ignore[arg-type]
        self.expect("(")
        if opcode == "parameter":
            instr.parameter_number = self.parse_int()
            if instr.parameter_number < 0:
                raise self.error("parameter number must be non-negative")
        elif opcode == "constant":
            if shape is None:
                raise self.error("constant needs a result shape", op_token.start)
            if self.peek().kind == IDENT and self.lookahead(1).is_punct("["):
                self.parse_shape()  # old dumps repeat the shape: constant(f32[2] {1, 2})
            instr.literal = parse_literal(self, shape)
            if instr.literal is ELIDED:  # kept as zeros of the shape, marked: it never runs
                instr.literal, instr.elided = zeros_like_shape(shape), True
        else:
            if not self.peek().is_punct(")"):
                instr.append_operand(self.parse_operand(comp))
                while self.accept(","):
                    instr.append_operand(self.parse_operand(comp))
        self.expect(")")
        if not opdef.accepts_arity(instr.operand_count):
            raise self.error(
                f"{opcode} takes {_arity(opdef.arity)} operands, got {instr.operand_count}",
                op_token.start,
            )
        while self.peek().is_punct(",") and self.lookahead(1).kind == ATTR:
            self.next()
            self.parse_attribute(instr)
        if (
            opcode in ("async-update", "async-done")
            and "calls" not in instr.attrs
            and instr.operand_count
            and instr.operand(0).opcode in ("async-start", "async-update")
        ):
            instr.attrs["calls"] = instr.operand(0).attrs["calls"]  # one computation per chain
        if opcode in ("reduce-window", "select-and-scatter") and "window" not in instr.attrs:
            instr.attrs["window"] = Window(())  # XLA's text omits the window of scalars
        for required in opdef.required_attrs:
            if required not in instr.attrs:
                raise self.error(
                    f"{opcode} {name} is missing required attribute {required}", op_token.start
                )
        if shape is None:
            if not opdef.shape_optional:
                raise self.error(f"{opcode} needs an explicit result shape", op_token.start)
            instr.shape = self.infer_shape(instr, op_token.start)
        comp.add_instruction(instr)
        return instr

    def infer_shape(self, instr: HloInstruction, offset: int) -> Shape:
        from ..ir.shape_inference import infer_shape

        try:
            if instr.opcode == "get-tuple-element":  # keep the operand's layouts, as XLA does
                return instr.operand(0).shape.tuple_shapes[instr.attrs["index"]]
            if instr.opcode == "tuple":
                return Shape.tuple_of(o.shape for o in instr.operands)
            # as XLA's parser: floats of different widths may meet; the verifier decides
            return infer_shape(instr, allow_mixed_precision=True).with_default_layout()
        except HloParseError:
            raise
        except Exception as exc:  # a shape rule rejected the operands
            raise self.error(f"cannot infer the shape of {instr.opcode}: {exc}", offset) from None

    def parse_operand(self, comp: HloComputation) -> HloInstruction:
        declared = self.parse_shape() if self.at_shape() else None
        token = self.expect_kind(IDENT, "an operand name")
        if self.peek().is_punct("("):  # nested anonymous instruction
            self.lexer.seek(token.start)
            self.anonymous += 1
            name = f"{token.text}.anon" + (f".{self.anonymous - 1}" if self.anonymous > 1 else "")
            instr = self.parse_instruction_rhs(comp, name, declared)
            self.scope[name] = instr
            return instr
        operand = self.scope.get(token.text)
        if operand is None:
            raise self.error(
                f"unknown operand '{token.text}' (operands must be defined before use)", token.start
            )
        while self.peek().is_punct("#"):  # `%p#1#0`: get-tuple-element shorthand
            self.next()
            operand = self.tuple_element(comp, operand, self.parse_int(), token.start)
        if declared is not None and not same(declared, operand.shape):  # dynamic dims aside
            raise self.error(
                f"operand {token.text} is declared {declared} but has shape {operand.shape}",
                token.start,
            )
        return operand

    def tuple_element(
        self, comp: HloComputation, tuple_: HloInstruction, index: int, offset: int
    ) -> HloInstruction:
        if not tuple_.shape.is_tuple or not 0 <= index < len(tuple_.shape.tuple_shapes):
            raise self.error(
                f"%{tuple_.name}#{index}: {tuple_.shape} has no element {index}", offset
            )
        key = f"{tuple_.name}#{index}"
        if key not in self.scope:
            element = HloInstruction(
                "get-tuple-element",
                tuple_.shape.tuple_shapes[index],
                [tuple_],
                {"index": index},
                name=f"{tuple_.name}.{index}",
            )
            comp.add_instruction(element)
            self.scope[key] = element
        return self.scope[key]

    def parse_attribute(self, instr: HloInstruction) -> None:
        token = self.expect_kind(ATTR, "an attribute")
        name = token.text
        if name in instr.attrs or (name == "control-predecessors" and instr.control_predecessors):
            raise self.error(f"attribute {name} given twice", token.start)
        if name not in instr.opdef.known_attrs:
            line, column, _ = self.lexer.location(token.start)
            if self.strict:
                raise self.error(
                    f"unknown attribute {name} for {instr.opcode} (it takes "
                    f"{', '.join(sorted(instr.opdef.known_attrs))}; "
                    f"strict=False or --lenient keeps it)",
                    token.start,
                )
            self.unknown_attributes.append(f"{line}:{column}: {instr.opcode} {instr.name}: {name}")
        value = attr_kind(name).parse(self)
        if name == "control-predecessors":
            for pred in value:
                pred.add_control_dependency_to(instr)
            return
        if name == "dim_labels":
            try:
                parse_dim_labels(value)
            except ValueError as exc:
                raise self.error(str(exc), token.start) from None
        instr.attrs[name] = value

    # -- attribute values (called through ir.attrs kinds) ---------------------------------
    def parse_computation_ref(self) -> HloComputation:
        if self.peek().is_punct("{"):  # inline anonymous computation
            self.anonymous += 1
            name = self.unique_computation_name("anon_computation")
            self.computations[name] = None  # taken: computations nested inside are named apart
            comp = self.parse_computation_body(name)
            self.computations[name] = comp
            self.inline_computations.append(comp)  # added to the module before its caller
            return comp
        token = self.expect_kind(IDENT, "a computation name")
        found = self.computations.get(token.text)
        if found is None:
            raise self.error(
                f"unknown computation '{token.text}' (computations must be defined before use)",
                token.start,
            )
        return found

    def unique_computation_name(self, base: str) -> str:
        name, i = base, 0
        while name in self.computations:
            i += 1
            name = f"{base}.{i}"
        return name

    def parse_computation_list(self) -> list[HloComputation]:
        self.expect("{")
        comps = []
        if not self.peek().is_punct("}"):
            comps.append(self.parse_computation_ref())
            while self.accept(","):
                comps.append(self.parse_computation_ref())
        self.expect("}")
        return comps

    def parse_instruction_list(self) -> list[HloInstruction]:
        self.expect("{")
        instrs: list[HloInstruction] = []
        while not self.peek().is_punct("}"):
            if instrs:
                self.expect(",")
            token = self.expect_kind(IDENT, "an instruction name")
            if token.text not in self.scope:
                raise self.error(f"unknown instruction '{token.text}'", token.start)
            instrs.append(self.scope[token.text])
        self.expect("}")
        return instrs


def _fill_missing_layouts(module: HloModule) -> None:
    """XLA's parser gives every array shape without a layout the default (row-major) one."""
    for instr in module.all_instructions():
        instr.shape = instr.shape.with_default_layout()
    layout = module.entry_computation_layout
    if layout is not None:
        module.entry_computation_layout = ProgramShape(
            tuple(s.with_default_layout() for s in layout.parameters),
            layout.result.with_default_layout(),
        )


def _async_sugar(opcode: str) -> tuple[str | None, str]:
    """`custom-call-start` -> ("custom-call", "-start"); (None, "") for other words."""
    for suffix in ASYNC_SUFFIXES:
        stem = opcode[: -len(suffix)]
        if opcode.endswith(suffix) and stem in OPCODES and not stem.startswith("async"):
            return stem, suffix
    return None, ""


def _arity(arity) -> str:
    if isinstance(arity, tuple):
        return f"at least {arity[0]}" if arity[1] is None else f"{arity[0]} to {arity[1]}"
    return "any number of" if arity is None else str(arity)


__all__ = ["parse_hlo_module", "parse_shape", "Parser"]
