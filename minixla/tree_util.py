"""`minixla.tree_util`: JAX's pytree utilities over minixla's pytree registry.

Containers are tuples, lists, dicts, namedtuples, None and any registered type; jit, vmap,
lax loops and the random module all take pytrees through the same registry.

    @minixla.tree_util.register_dataclass
    @dataclasses.dataclass
    class Params:
        w: np.ndarray
        b: np.ndarray
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

from .frontend.errors import FrontendTypeError
from .frontend.pytree import TreeDef, children_of, flatten, register_node, tree_map, unflatten
from .frontend.pytree import _REGISTRY

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "SequenceKey",
    "TreeDef",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "tree_all",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_structure",
    "tree_unflatten",
]


def register_pytree_node(nodetype: type, flatten_func, unflatten_func) -> None:
    """flatten_func(node) -> (children, aux_data); unflatten_func(aux_data, children) -> node.
    aux_data must be hashable: it is part of jit's cache key."""
    register_node(nodetype, flatten_func, unflatten_func)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: uses `node.tree_flatten()` and `cls.tree_unflatten(aux, children)`."""
    register_node(cls, lambda node: node.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(nodetype: type = None, data_fields=None, meta_fields=None, drop_fields=()):
    """Registers a dataclass: `data_fields` are children, `meta_fields` static aux data.
    Without lists, fields marked `field(metadata={"static": True})` are meta, others data.
    Usable as a decorator."""
    if nodetype is None:
        return functools.partial(
            register_dataclass,
            data_fields=data_fields,
            meta_fields=meta_fields,
            drop_fields=drop_fields,
        )
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise FrontendTypeError(
                f"register_dataclass: {nodetype.__name__} is not a "
                f"dataclass; pass data_fields and meta_fields"
            )
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    data_fields, meta_fields = tuple(data_fields or ()), tuple(meta_fields or ())

    def flatten_node(node):
        children = [getattr(node, name) for name in data_fields]
        return children, tuple(getattr(node, name) for name in meta_fields)

    def unflatten_node(aux, children):
        node = object.__new__(nodetype)  # frozen dataclasses too, without running __init__
        for name, value in zip(data_fields + meta_fields, list(children) + list(aux)):
            object.__setattr__(node, name, value)
        return node

    register_node(
        nodetype,
        flatten_node,
        unflatten_node,
        lambda node, count: [GetAttrKey(name) for name in data_fields],
    )
    return nodetype


def tree_flatten(tree, is_leaf=None) -> tuple[list, TreeDef]:
    return flatten(tree, is_leaf)


def tree_unflatten(treedef: TreeDef, leaves) -> Any:
    return unflatten(treedef, leaves)


def tree_leaves(tree, is_leaf=None) -> list:
    return flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None) -> TreeDef:
    return flatten(tree, is_leaf)[1]


_MISSING = object()


def tree_reduce(function, tree, initializer=_MISSING, is_leaf=None):
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _MISSING:
        if not leaves:
            raise FrontendTypeError("tree_reduce of an empty tree needs an initializer")
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree) -> bool:
    return all(tree_leaves(tree))


# -- key paths --------------------------------------------------------------------------------
class SequenceKey(NamedTuple):
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx}]"


class DictKey(NamedTuple):
    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"


class GetAttrKey(NamedTuple):
    name: str

    def __str__(self) -> str:
        return f".{self.name}"


class FlattenedIndexKey(NamedTuple):
    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


def keystr(path) -> str:
    return "".join(map(str, path))


def _child_keys(tree, kind, data, count: int) -> list:
    if kind == "dict":
        return [DictKey(k) for k in data]
    if kind == "namedtuple":
        return [GetAttrKey(name) for name in tree._fields]
    if kind == "custom":
        registered = _REGISTRY[type(tree)]
        if registered.child_keys is not None:
            return registered.child_keys(tree, count)
        return [FlattenedIndexKey(i) for i in range(count)]
    return [SequenceKey(i) for i in range(count)]


def tree_flatten_with_path(tree, is_leaf=None) -> tuple[list, TreeDef]:
    """([(path, leaf), ...], treedef); a path is a tuple of key entries."""
    pairs: list = []

    def walk(node, path):
        if is_leaf is not None and is_leaf(node):
            pairs.append((path, node))
            return
        info = children_of(node)
        if info is None:
            if node is not None:
                pairs.append((path, node))
            return
        kind, data, children = info
        for key, child in zip(_child_keys(node, kind, data, len(children)), children):
            walk(child, path + (key,))

    walk(tree, ())
    return pairs, tree_structure(tree, is_leaf)


def tree_map_with_path(fn, tree, *rest, is_leaf=None):
    """`fn(path, leaf, *other_leaves)` over the leaves of `tree`."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf)
    others = [tree_leaves(r, is_leaf) for r in rest]
    return unflatten(treedef, [fn(path, leaf, *xs) for (path, leaf), *xs in zip(pairs, *others)])
