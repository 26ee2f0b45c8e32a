"""Minimal pytrees: nested tuples, lists and dicts (keys sorted); ``None`` has no leaves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TreeDef:
    """The structure of a pytree: ``kind`` is leaf, none, tuple, list or dict."""

    kind: str
    children: tuple[TreeDef, ...] = ()
    keys: tuple[Any, ...] = ()

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        if self.kind == "dict":
            inner = ", ".join(f"{k!r}: {c}" for k, c in zip(self.keys, self.children, strict=False))
            return "{" + inner + "}"
        inner = ", ".join(str(c) for c in self.children)
        if self.kind == "tuple":
            return f"({inner},)" if len(self.children) == 1 else f"({inner})"
        return f"[{inner}]"


def flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], TreeDef]:
    leaves: list[Any] = []
    return leaves, _flatten(tree, leaves, is_leaf)


def _flatten(tree: Any, leaves: list[Any], is_leaf: Callable[[Any], bool] | None) -> TreeDef:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return TreeDef("leaf")
    if tree is None:
        return TreeDef("none")
    if isinstance(tree, (tuple, list)):
        kids = tuple(_flatten(x, leaves, is_leaf) for x in tree)
        return TreeDef("tuple" if isinstance(tree, tuple) else "list", kids)
    if isinstance(tree, dict):
        keys = tuple(sorted(tree))
        kids = tuple(_flatten(tree[k], leaves, is_leaf) for k in keys)
        return TreeDef("dict", kids, keys)
    leaves.append(tree)
    return TreeDef("leaf")


def unflatten(treedef: TreeDef, leaves: Any) -> Any:
    it = iter(leaves)
    out = _build(treedef, it)
    return out


def _build(td: TreeDef, it: Any) -> Any:
    if td.kind == "leaf":
        return next(it)
    if td.kind == "none":
        return None
    kids = [_build(c, it) for c in td.children]
    if td.kind == "dict":
        return dict(zip(td.keys, kids, strict=False))
    return tuple(kids) if td.kind == "tuple" else kids


def broadcast_prefix(prefix: Any, tree: Any, what: str = "specification") -> list[Any]:
    """For each leaf of ``tree``, the leaf of ``prefix`` that covers it.

    A leaf of ``prefix`` (anything but a tuple, list or dict) applies to the whole subtree
    at its position.
    """
    out: list[Any] = []
    _broadcast(prefix, tree, out, "args", what)
    return out


def _broadcast(prefix: Any, tree: Any, out: list[Any], path: str, what: str) -> None:
    if not isinstance(prefix, (tuple, list, dict)):
        out.extend([prefix] * len(flatten(tree)[0]))
        return
    if isinstance(prefix, dict):
        if not isinstance(tree, dict) or sorted(tree) != sorted(prefix):
            raise ValueError(
                f"The {what} at {path} is a dict with keys {sorted(prefix)!r}, but the "
                f"arguments there are {_kind(tree)}; the {what} must be a prefix of the "
                "argument tree"
            )
        for k in sorted(prefix):
            _broadcast(prefix[k], tree[k], out, f"{path}[{k!r}]", what)
        return
    if not isinstance(tree, (tuple, list)) or len(tree) != len(prefix):
        raise ValueError(
            f"The {what} at {path} is a {type(prefix).__name__} of length {len(prefix)}, but "
            f"the arguments there are {_kind(tree)}; the {what} must be a prefix of the "
            "argument tree"
        )
    for i, (p, t) in enumerate(zip(prefix, tree, strict=False)):
        _broadcast(p, t, out, f"{path}[{i}]", what)


def _kind(tree: Any) -> str:
    if isinstance(tree, (tuple, list)):
        return f"a {type(tree).__name__} of length {len(tree)}"
    if isinstance(tree, dict):
        return f"a dict with keys {sorted(tree)!r}"
    return f"a leaf of type {type(tree).__name__}"
