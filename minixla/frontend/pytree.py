"""Pytrees: nested containers with arrays or scalars at the leaves.

Tuples, lists, dicts (sorted keys), namedtuples and None (an empty subtree, as in JAX) are
built in; `register_node` adds any other type with a flatten function (node -> (children,
hashable aux data)) and an unflatten function ((aux data, children) -> node), the way JAX's
`register_pytree_node` does. `flatten` gives the leaves and a hashable TreeDef (jit's cache
keys use it), `unflatten` rebuilds the structure. The public API is `minixla.tree_util`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .errors import FrontendTypeError


@dataclass(frozen=True)
class NodeType:
    """How a registered type flattens: children, hashable aux data, and names for paths."""

    flatten: Callable[[Any], tuple]  # node -> (children, aux_data)
    unflatten: Callable[[Any, list], Any]  # (aux_data, children) -> node
    child_keys: Callable[[Any, int], list] | None = None  # (node, count) -> path entries


_REGISTRY: dict[type, NodeType] = {}


def register_node(cls: type, flatten_fn, unflatten_fn, child_keys=None) -> None:
    if cls in _REGISTRY or cls in (tuple, list, dict, type(None)):
        raise FrontendTypeError(f"{cls.__name__} is already a registered pytree node")
    _REGISTRY[cls] = NodeType(flatten_fn, unflatten_fn, child_keys)


@dataclass(frozen=True)
class TreeDef:
    kind: str  # "leaf", "none", "tuple", "namedtuple", "list", "dict", "custom"
    children: tuple["TreeDef", ...] = ()
    keys: tuple = ()  # dict keys (sorted), (the namedtuple class,), or (type, aux data)

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    @property
    def num_nodes(self) -> int:
        return 1 + sum(c.num_nodes for c in self.children)

    def unflatten(self, leaves) -> Any:
        return unflatten(self, leaves)

    def __repr__(self) -> str:
        return f"PyTreeDef({self})"

    def __str__(self) -> str:
        if self.kind in ("leaf", "none"):
            return "*" if self.kind == "leaf" else "None"
        inner = (
            ", ".join(f"{k!r}: {c}" for k, c in zip(self.keys, self.children))
            if self.kind == "dict"
            else ", ".join(map(str, self.children))
        )
        if self.kind == "custom":
            return f"{self.keys[0].__name__}[{self.keys[1]!r}]({inner})"
        if self.kind == "namedtuple":
            return f"{self.keys[0].__name__}({inner})"
        return {"tuple": f"({inner})", "list": f"[{inner}]", "dict": f"{{{inner}}}"}[self.kind]


LEAF = TreeDef("leaf")


def flatten(tree, is_leaf=None) -> tuple[list, TreeDef]:
    leaves: list = []
    return leaves, _flatten(tree, leaves, is_leaf)


def _flatten(tree, leaves: list, is_leaf) -> TreeDef:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return LEAF
    node = children_of(tree)
    if node is None:
        if tree is None:
            return TreeDef("none")
        leaves.append(tree)
        return LEAF
    kind, data, children = node
    subtrees = tuple(_flatten(c, leaves, is_leaf) for c in children)
    if kind in ("tuple", "list"):
        data = ()
    return TreeDef(kind, subtrees, data)


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


def children_of(tree):
    """(kind, node data, children) of a container node; None for a leaf or None."""
    if tree is None:
        return None
    registered = _REGISTRY.get(type(tree))
    if registered is not None:
        children, aux = registered.flatten(tree)
        return "custom", (type(tree), aux), tuple(children)
    if _is_namedtuple(tree):
        return "namedtuple", (type(tree),), tuple(tree)
    if isinstance(tree, (tuple, list)):
        return ("tuple" if isinstance(tree, tuple) else "list"), len(tree), tuple(tree)
    if isinstance(tree, dict):
        keys = tuple(sorted(tree))
        return "dict", keys, tuple(tree[k] for k in keys)
    return None


def unflatten(treedef: TreeDef, leaves) -> Any:
    it = iter(leaves)
    out = _unflatten(treedef, it)
    if next(it, _END) is not _END:
        raise ValueError(f"too many leaves for tree {treedef}")
    return out


_END = object()


def _unflatten(treedef: TreeDef, it):
    if treedef.kind == "leaf":
        value = next(it, _END)
        if value is _END:
            raise ValueError("too few leaves for the tree")
        return value
    if treedef.kind == "none":
        return None
    children = [_unflatten(c, it) for c in treedef.children]
    if treedef.kind == "dict":
        return dict(zip(treedef.keys, children))
    if treedef.kind == "namedtuple":
        return treedef.keys[0](*children)
    if treedef.kind == "custom":
        cls, aux = treedef.keys
        return _REGISTRY[cls].unflatten(aux, children)
    return tuple(children) if treedef.kind == "tuple" else children


def tree_map(fn, tree, *rest, is_leaf=None):
    leaves, treedef = flatten(tree, is_leaf)
    others = []
    for other in rest:
        other_leaves, other_def = flatten(other, is_leaf)
        if other_def != treedef:
            raise FrontendTypeError(f"tree_map: the trees differ: {treedef} and {other_def}")
        others.append(other_leaves)
    return unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])
