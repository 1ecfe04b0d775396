"""Pytrees: nested tuples, lists and dicts (sorted keys) with arrays or scalars at the leaves.

`flatten` gives the leaves and a hashable TreeDef; `unflatten` rebuilds the structure. None is
an empty subtree, as in JAX.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TreeDef:
    kind: str  # "leaf", "none", "tuple", "namedtuple", "list", "dict"
    children: tuple["TreeDef", ...] = ()
    keys: tuple = ()  # dict keys (sorted), or (the namedtuple class,)

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self) -> str:
        if self.kind in ("leaf", "none"):
            return "*" if self.kind == "leaf" else "None"
        inner = ", ".join(f"{k!r}: {c}" for k, c in zip(self.keys, self.children)) \
            if self.kind == "dict" else ", ".join(map(str, self.children))
        return {"tuple": f"({inner})", "namedtuple": f"({inner})", "list": f"[{inner}]", "dict": f"{{{inner}}}"}[self.kind]


LEAF = TreeDef("leaf")


def flatten(tree) -> tuple[list, TreeDef]:
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves: list) -> TreeDef:
    if tree is None:
        return TreeDef("none")
    if _is_namedtuple(tree):
        return TreeDef("namedtuple", tuple(_flatten(item, leaves) for item in tree),
                       (type(tree),))
    if isinstance(tree, (tuple, list)):
        kind = "tuple" if isinstance(tree, tuple) else "list"
        return TreeDef(kind, tuple(_flatten(item, leaves) for item in tree))
    if isinstance(tree, dict):
        keys = tuple(sorted(tree))
        return TreeDef("dict", tuple(_flatten(tree[k], leaves) for k in keys), keys)
    leaves.append(tree)
    return LEAF


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


def unflatten(treedef: TreeDef, leaves) -> Any:
    it = iter(leaves)
    out = _unflatten(treedef, it)
    if next(it, _END) is not _END:
        raise ValueError(f"too many leaves for tree {treedef}")
    return out


_END = object()


def _unflatten(treedef: TreeDef, it):
    if treedef.kind == "leaf":
        return next(it)
    if treedef.kind == "none":
        return None
    children = [_unflatten(c, it) for c in treedef.children]
    if treedef.kind == "dict":
        return dict(zip(treedef.keys, children))
    if treedef.kind == "namedtuple":
        return treedef.keys[0](*children)
    return tuple(children) if treedef.kind == "tuple" else children


def tree_map(fn, tree, *rest):
    leaves, treedef = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])


def children_of(tree):
    """(kind, node data, children) of a container node; None for a leaf or None."""
    if tree is None:
        return None
    if _is_namedtuple(tree):
        return "namedtuple", type(tree), tuple(tree)
    if isinstance(tree, (tuple, list)):
        return ("tuple" if isinstance(tree, tuple) else "list"), len(tree), tuple(tree)
    if isinstance(tree, dict):
        keys = tuple(sorted(tree))
        return "dict", keys, tuple(tree[k] for k in keys)
    return None
