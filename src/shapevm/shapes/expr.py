"""Symbolic dimension expressions: canonical integer polynomials over factors.

A dimension expression is a sum of terms ``coeff * monomial``. A monomial is a product of
factors raised to positive powers; a factor (an :class:`Atom`) is either a dimension
variable or one of the operations ``floordiv``, ``mod``, ``max``, ``min`` applied to two
expressions. Expressions are kept in a canonical form:

* terms sorted by decreasing degree, then by the factors' keys; zero terms dropped;
* ``floordiv``/``mod`` by a constant pull out the part of the dividend that divides
  evenly (``floordiv(2*a + 5, 2) = a + 2``, ``mod(6*a + 4, 3) = 1``); division by an
  expression that divides the dividend exactly is exact (``(a*b + a) // (b + 1) = a``);
* ``k*y*floordiv(x, y) + k*mod(x, y)`` is rewritten to ``k*x``;
* ``max``/``min`` whose answer is provable under the scope's constraints are resolved;
  otherwise their operands are sorted, so ``max(a, b) == max(b, a)``;
* equality constraints of the scope (``lhs == rhs`` with a product of factors on the left)
  rewrite every occurrence of ``lhs``;
* an expression without variables is a plain ``int``.

Equality (``==``) is structural on the canonical form: total, hashable, and True only when
the two expressions are provably equal. Ordered comparisons are decided by
:mod:`shapevm.shapes.compare` with the bounds of :mod:`shapevm.shapes.bounds`.
"""

from __future__ import annotations

import operator
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

from shapevm.shapes.errors import InconclusiveDimensionOperation, ScopeMixError

if TYPE_CHECKING:
    from shapevm.shapes.scope import SymbolicScope

# A monomial: ((atom, exponent), ...) sorted by the atoms' keys; () is the constant monomial.
Mono = tuple[tuple["Atom", int], ...]
Poly = dict[Mono, int]
DimSize = Union[int, "DimExpr"]

_OPS = ("floordiv", "mod", "max", "min")


class Atom:
    """A factor: a dimension variable (``op == "var"``) or an operation on expressions.

    Atoms are interned: one object per factor (per scope, for operations), so that equality
    is identity and hashing is the default one, cheap where monomials are dictionary keys.
    """

    __slots__ = ("__weakref__", "args", "key", "op")
    op: str
    args: tuple[Any, ...]
    key: tuple[Any, ...]

    def __new__(cls, op: str, args: tuple[Any, ...]) -> Atom:
        if op == "var":
            key: tuple[Any, ...] = (0, args[0])
            ident: tuple[Any, ...] = key
        else:
            key = (1, op, *(_key_of(a) for a in args))
            scope = next((a._scope._id for a in args if isinstance(a, DimExpr)), 0)
            ident = (key, scope)
        atom = _ATOMS.get(ident)
        if atom is None:
            with _ATOMS_LOCK:
                atom = _ATOMS.get(ident)
                if atom is None:
                    atom = object.__new__(cls)
                    atom.op, atom.args, atom.key = op, args, key
                    _ATOMS[ident] = atom
        return atom

    def __repr__(self) -> str:
        return _atom_str(self)

    def evaluate(self, env: Mapping[str, int]) -> int:
        if self.op == "var":
            name = self.args[0]
            try:
                return int(env[name])
            except KeyError:
                raise KeyError(f"no value for dimension variable '{name}'") from None
        x, y = (evaluate(a, env) for a in self.args)
        if self.op in ("floordiv", "mod"):
            if y == 0:
                raise ZeroDivisionError(f"division by zero when evaluating {self}")
            return x // y if self.op == "floordiv" else x % y
        return max(x, y) if self.op == "max" else min(x, y)


_ATOMS: weakref.WeakValueDictionary[tuple[Any, ...], Atom] = weakref.WeakValueDictionary()
_ATOMS_LOCK = threading.Lock()


def _key_of(x: DimSize) -> tuple[Any, ...]:
    if isinstance(x, int):
        return (((), x),) if x else ()
    return x._key


_MONO_KEYS: dict[Mono, tuple[Any, ...]] = {}


def _mono_key(m: Mono) -> tuple[Any, ...]:
    key = _MONO_KEYS.get(m)
    if key is None:
        if len(_MONO_KEYS) > 50_000:
            _MONO_KEYS.clear()
        key = _MONO_KEYS[m] = tuple((a.key, -e) for a, e in m)
    return key


def _term_order(item: tuple[Mono, int]) -> tuple[Any, ...]:
    mono = item[0]
    return (-sum(e for _, e in mono), _mono_key(mono))


class DimExpr:
    """A symbolic dimension: an integer-valued expression over dimension variables (>= 1).

    Created by :func:`shapevm.symbolic_shape`; supports ``+ - * // % **``, ``divmod``,
    unary minus, comparisons and :meth:`evaluate`.

    >>> import shapevm as sv
    >>> a, b = sv.symbolic_shape("a, b")
    >>> print(2 * a + b - 1)
    2*a + b - 1
    >>> (a * b) // b
    a
    >>> a * b >= a
    True
    >>> (a + 1).evaluate({"a": 4})
    5
    """

    __slots__ = ("_hash", "_key", "_scope", "_str", "_terms")

    def __init__(self, terms: tuple[tuple[Mono, int], ...], scope: SymbolicScope) -> None:
        self._terms = terms
        self._scope = scope
        self._key: tuple[Any, ...] = tuple((_mono_key(m), c) for m, c in terms)
        self._hash = hash((self._key, scope._id))  # dimensions of two scopes differ
        self._str: str | None = None

    # -- identity ------------------------------------------------------------------------
    @property
    def scope(self) -> SymbolicScope:
        """The :class:`SymbolicScope` this expression belongs to."""
        return self._scope

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DimExpr):
            return (
                self._hash == other._hash
                and self._key == other._key
                and self._scope is other._scope
            )
        if isinstance(other, int):
            return False  # a DimExpr is never a constant
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __str__(self) -> str:
        if self._str is None:
            self._str = _poly_str(self._terms)
        return self._str

    def __repr__(self) -> str:
        return str(self)

    def min_max(self) -> tuple[str, DimSize, DimSize] | None:
        """``("min", a, b)`` when the expression is ``min(a, b)`` itself (``max`` alike; no
        coefficient, no other term), else None."""
        if len(self._terms) == 1:
            mono, coeff = self._terms[0]
            if coeff == 1 and len(mono) == 1 and mono[0][1] == 1 and mono[0][0].op in _OPS[2:]:
                atom = mono[0][0]
                return atom.op, atom.args[0], atom.args[1]
        return None

    def free_vars(self) -> frozenset[str]:
        """Names of the dimension variables in the expression."""
        out: set[str] = set()
        _collect_vars(self, out)
        return frozenset(out)

    def evaluate(self, env: Mapping[str, int]) -> int:
        """Value of the expression when each variable ``v`` has the value ``env[v]``."""
        total = 0
        for mono, coeff in self._terms:
            value = coeff
            for atom, exp in mono:
                value *= atom.evaluate(env) ** exp
            total += value
        return total

    # -- arithmetic ----------------------------------------------------------------------
    def __add__(self, other: Any) -> Any:
        return _binop(self, other, add, "__add__")

    def __radd__(self, other: Any) -> Any:
        return _binop(other, self, add, "__radd__", self)

    def __sub__(self, other: Any) -> Any:
        return _binop(self, other, sub, "__sub__")

    def __rsub__(self, other: Any) -> Any:
        return _binop(other, self, sub, "__rsub__", self)

    def __mul__(self, other: Any) -> Any:
        return _binop(self, other, mul, "__mul__")

    def __rmul__(self, other: Any) -> Any:
        return _binop(other, self, mul, "__rmul__", self)

    def __floordiv__(self, other: Any) -> Any:
        return _binop(self, other, floordiv, "__floordiv__")

    def __rfloordiv__(self, other: Any) -> Any:
        return _binop(other, self, floordiv, "__rfloordiv__", self)

    def __mod__(self, other: Any) -> Any:
        return _binop(self, other, mod, "__mod__")

    def __rmod__(self, other: Any) -> Any:
        return _binop(other, self, mod, "__rmod__", self)

    def __divmod__(self, other: Any) -> Any:
        return self // other, self % other

    def __rdivmod__(self, other: Any) -> Any:
        return other // self, other % self

    def __pow__(self, exponent: Any) -> DimSize:
        try:
            k = operator.index(exponent)
        except TypeError:
            return NotImplemented
        if k < 0:
            raise ValueError(
                f"Symbolic dimension {self} raised to the negative power {k}: "
                "dimension expressions are integer polynomials; use a non-negative exponent"
            )
        return power(self, k)

    def __neg__(self) -> DimSize:
        return mul(self, -1)

    def __pos__(self) -> DimExpr:
        return self

    def __truediv__(self, other: Any) -> Any:
        return _compare.nonint_operand(self, other, "__truediv__")

    def __rtruediv__(self, other: Any) -> Any:
        return _compare.nonint_operand(self, other, "__rtruediv__")

    # -- comparisons ---------------------------------------------------------------------
    def __ge__(self, other: Any) -> bool:
        return _compare.compare(self, other, ">=")

    def __gt__(self, other: Any) -> bool:
        return _compare.compare(self, other, ">")

    def __le__(self, other: Any) -> bool:
        return _compare.compare(self, other, "<=")

    def __lt__(self, other: Any) -> bool:
        return _compare.compare(self, other, "<")

    def __bool__(self) -> bool:
        lo, hi = self._scope.bounds(self)
        if lo > 0 or hi < 0:
            return True
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension '{self}' used as a truth value: it may be zero or non-zero "
            f"for different values of the dimension variables (bounds: [{lo}, {hi}]).\n"
            "Compare it explicitly (e.g. `d >= 1`) or add a constraint to the scope."
        )

    def __int__(self) -> int:
        raise _not_constant(self)

    def __index__(self) -> int:
        raise _not_constant(self)

    def __float__(self) -> float:
        raise _not_constant(self)


def _not_constant(e: DimExpr) -> InconclusiveDimensionOperation:
    return InconclusiveDimensionOperation(
        f"Symbolic dimension '{e}' is used where a constant is required "
        "(int(), an index, or a concrete shape).\n"
        "The value of a symbolic dimension is only known when the program runs. Keep it "
        "symbolic (dimension expressions support + - * // % and comparisons), or turn it "
        "into an array with `shapevm.numpy.asarray(dim)`. To slice or index a NumPy array "
        "by it (a table of positions `table[:s]`), make the array a traced constant first: "
        "`shapevm.numpy.asarray(table)[:s]`."
    )


def _binop(
    x: Any, y: Any, fn: Callable[[DimSize, DimSize], DimSize], method: str, me: Any = None
) -> Any:
    for v in (x, y):
        if not isinstance(v, (int, DimExpr)):
            try:
                operator.index(v)
            except TypeError:
                return _compare.nonint_operand(me if me is not None else x, v, method)
    return fn(_as_dim(x), _as_dim(y))


def _as_dim(v: Any) -> DimSize:
    if isinstance(v, DimExpr):
        return v
    if isinstance(v, bool):
        raise TypeError(f"a boolean ({v}) cannot be used as a dimension")
    return operator.index(v)


# ---------------------------------------------------------------------------------------
# Polynomials


def as_poly(x: DimSize) -> Poly:
    if isinstance(x, int):
        return {(): x} if x else {}
    return dict(x._terms)


def scope_of(*xs: Any) -> SymbolicScope | None:
    scope = None
    for x in xs:
        if isinstance(x, DimExpr):
            if scope is None:
                scope = x._scope
            elif x._scope is not scope:
                raise ScopeMixError(
                    "Invalid mixing of symbolic scopes.\n"
                    f"  expected: {scope.describe()}\n"
                    f"  found for '{x}': {x._scope.describe()}\n"
                    "  fix: create all dimensions of one function in one scope, e.g. "
                    "symbolic_shape('b', scope=a.scope) or one SymbolicScope passed to each "
                    "symbolic_shape call"
                )
    return scope


def mono_mul(m1: Mono, m2: Mono) -> Mono:
    if not m1:
        return m2
    if not m2:
        return m1
    d: dict[Atom, int] = dict(m1)
    for a, e in m2:
        d[a] = d.get(a, 0) + e
    return tuple(sorted(d.items(), key=lambda ae: ae[0].key))


def poly_add(p: Mapping[Mono, Any], q: Mapping[Mono, Any], k: Any = 1) -> dict[Mono, Any]:
    out = dict(p)
    for m, c in q.items():
        v = out.get(m, 0) + k * c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def poly_mul(p: Mapping[Mono, Any], q: Mapping[Mono, Any]) -> dict[Mono, Any]:
    out: dict[Mono, Any] = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            m = mono_mul(m1, m2)
            v = out.get(m, 0) + c1 * c2
            if v:
                out[m] = v
            else:
                out.pop(m, None)
    return out


def make(p: Poly, scope: SymbolicScope | None) -> DimSize:
    """The canonical expression of polynomial ``p`` in ``scope``."""
    p = {m: c for m, c in p.items() if c}
    if not p:
        return 0
    if len(p) == 1 and () in p:
        return p[()]
    assert scope is not None, "a non-constant polynomial needs a scope"
    if scope._remainders:
        p = _exact_quotients(p, scope._remainders)
    if scope._rules:
        p = scope._apply_rules(p)
        if not p or (len(p) == 1 and () in p):
            return p.get((), 0)
    if any(a.op == "mod" for m in p for a, _ in m):
        p = _recombine_mod(p, scope)
        if not p or (len(p) == 1 and () in p):
            return p.get((), 0)
    return DimExpr(tuple(sorted(p.items(), key=_term_order)), scope)


def _exact_quotients(p: Poly, remainders: Mapping[Atom, Poly]) -> Poly:
    """Rewrite ``k*c*floordiv(x, c)`` to ``k*(x - r)`` where a rule says ``mod(x, c) == r``
    (``4*floordiv(b, 4)`` is ``b`` under ``mod(b, 4) == 0``), until none is left: a
    rewrite makes new monomials, and one may hold another such quotient
    (``256*floordiv(h, 16)*floordiv(w, 16)`` is ``16*h*floordiv(w, 16)``, then ``h*w``).
    Each rewrite is an identity, and divides a coefficient by its divisor; the bound only
    guards against remainder rules that feed each other."""
    for _ in range(256):
        rewritten = _one_exact_quotient(p, remainders)
        if rewritten is None:
            break
        p = rewritten
    return p


def _one_exact_quotient(p: Poly, remainders: Mapping[Atom, Poly]) -> Poly | None:
    """``p`` with its first quotient that a remainder rule makes exact rewritten, or None."""
    for mono, coeff in p.items():
        for i, (atom, exp) in enumerate(mono):
            if atom.op != "floordiv" or exp != 1 or not isinstance(atom.args[1], int):
                continue
            x, c = atom.args
            r = remainders.get(Atom("mod", (x, c)))
            if r is None or coeff % c:
                continue
            rest: Poly = {mono[:i] + mono[i + 1 :]: coeff // c}
            out = poly_add(p, {mono: coeff}, -1)
            return poly_add(out, poly_mul(rest, poly_add(as_poly(x), r, -1)))
    return None


def _recombine_mod(p: Poly, scope: SymbolicScope) -> Poly:
    """Rewrite ``k*r*y*floordiv(x, y) + k*r*mod(x, y)`` to ``k*r*x``."""
    changed = True
    while changed:
        changed = False
        for mono, coeff in list(p.items()):
            for i, (atom, exp) in enumerate(mono):
                if atom.op != "mod" or exp != 1:
                    continue
                x, y = atom.args
                rest: Poly = {mono[:i] + mono[i + 1 :]: coeff}
                fd: Poly = {((Atom("floordiv", (x, y)), 1),): 1}
                partner = poly_mul(poly_mul(rest, as_poly(y)), fd)
                if all(p.get(m) == c for m, c in partner.items()):
                    p = poly_add(poly_add(p, partner, -1), {mono: coeff}, -1)
                    p = poly_add(p, poly_mul(rest, as_poly(x)))
                    changed = True
                    break
            if changed:
                break
    return p


# ---------------------------------------------------------------------------------------
# Constructors for each operation (all operands already int or DimExpr).


def add(x: DimSize, y: DimSize) -> DimSize:
    if isinstance(x, int):
        return x + y if isinstance(y, int) else _plus_constant(y, x)
    if isinstance(y, int):
        return _plus_constant(x, y)
    return make(poly_add(as_poly(x), as_poly(y)), scope_of(x, y))


def sub(x: DimSize, y: DimSize) -> DimSize:
    if isinstance(x, int) and isinstance(y, int):
        return x - y
    if isinstance(y, int):
        return _plus_constant(x, -y)  # type: ignore[arg-type]
    return make(poly_add(as_poly(x), as_poly(y), -1), scope_of(x, y))


def _plus_constant(x: DimExpr, k: int) -> DimExpr:
    """``x + k``: only the constant term changes, and it stays last in canonical order."""
    terms = x._terms
    if terms[-1][0] == ():
        k += terms[-1][1]
        terms = terms[:-1]
    return DimExpr((*terms, ((), k)) if k else terms, x._scope)


def mul(x: DimSize, y: DimSize) -> DimSize:
    if isinstance(x, int) and isinstance(y, int):
        return x * y
    if isinstance(x, int):
        x, y = y, x
    if isinstance(y, int):
        assert isinstance(x, DimExpr)
        if y == 0:
            return 0
        if not x._scope._remainders:  # scaling keeps the canonical form and its order
            return DimExpr(tuple((m, c * y) for m, c in x._terms), x._scope)
        return make({m: c * y for m, c in x._terms}, x._scope)
    return make(poly_mul(as_poly(x), as_poly(y)), scope_of(x, y))


def power(x: DimSize, k: int) -> DimSize:
    result: DimSize = 1
    for _ in range(k):
        result = mul(result, x)
    return result


def _zero_division(x: DimSize, op: str) -> ZeroDivisionError:
    return ZeroDivisionError(f"Symbolic dimension division by zero: {op}({x}, 0)")


def floordiv(x: DimSize, y: DimSize) -> DimSize:
    if y == 0:
        raise _zero_division(x, "floordiv")
    if isinstance(x, int) and isinstance(y, int):
        return x // y
    scope = scope_of(x, y)
    if isinstance(y, int) and y < 0:  # floor(x / -c) == floor(-x / c)
        return floordiv(mul(x, -1), -y)
    if isinstance(y, int):
        quot: Poly = {}
        rem: Poly = {}
        for m, c in as_poly(x).items():
            q, r = _trunc_divmod(c, y)
            if q:
                quot[m] = q
            if r:
                rem[m] = r
        if not rem or list(rem) == [()]:
            return make(poly_add(quot, {(): rem.get((), 0) // y}), scope)
        rem_e = make(rem, scope)
        return make(poly_add(quot, {((Atom("floordiv", (rem_e, y)), 1),): 1}), scope)
    assert scope is not None and isinstance(y, DimExpr)
    scope.check_divisor("floordiv", x, y)
    exact = _divide(as_poly(x), as_poly(y), scope)
    if exact is not None:
        return make(exact, scope)
    return make({((Atom("floordiv", (x, y)), 1),): 1}, scope)


def mod(x: DimSize, y: DimSize) -> DimSize:
    if y == 0:
        raise _zero_division(x, "mod")
    if isinstance(x, int) and isinstance(y, int):
        return x % y
    scope = scope_of(x, y)
    if isinstance(y, int) and y < 0:  # x mod -c == -((-x) mod c)
        return mul(mod(mul(x, -1), -y), -1)
    if isinstance(y, int):
        rem = {m: r for m, c in as_poly(x).items() if (r := _trunc_divmod(c, y)[1])}
        if not rem or list(rem) == [()]:
            return rem.get((), 0) % y
        return make({((Atom("mod", (make(rem, scope), y)), 1),): 1}, scope)
    assert scope is not None and isinstance(y, DimExpr)
    scope.check_divisor("mod", x, y)
    if _divide(as_poly(x), as_poly(y), scope) is not None:
        return 0
    return make({((Atom("mod", (x, y)), 1),): 1}, scope)


def _trunc_divmod(c: int, y: int) -> tuple[int, int]:
    """Quotient rounded toward zero, so the remainder keeps the sign of ``c`` (``y > 0``).

    Splitting ``floordiv(sum c_i m_i, y)`` into ``sum q_i m_i + floordiv(sum r_i m_i, y)``
    is exact for any integers ``q_i``; rounding toward zero keeps ``floordiv(-b, 3)`` whole
    (with its sign known) instead of ``-b + floordiv(2*b, 3)``.
    """
    q = -((-c) // y) if c < 0 else c // y
    return q, c - q * y


def _divide(p: Poly, d: Poly, scope: SymbolicScope) -> Poly | None:
    """The polynomial ``q`` with ``p == q * d`` under the scope's rules, or None.

    Beyond polynomial division, a variable ``x`` with a rule ``mod(x, c) == r`` is
    ``c*floordiv(x, c) + r``: ``3*b*h*w`` over ``b*floordiv(h, 4)*floordiv(w, 4)`` (a
    reshape's ``-1`` in an image's patches) is 48 under ``mod(h, 4) == 0`` and
    ``mod(w, 4) == 0``, which the division of ``p`` as it is written cannot see."""
    q = _exact_division(p, d)
    if q is not None or not scope._remainders:
        return q
    subs: dict[Atom, Poly] = {}
    for atom, r in scope._remainders.items():
        x, c = atom.args
        if not isinstance(c, int) or not isinstance(x, DimExpr) or len(x._terms) != 1:
            continue
        (mono, coeff) = x._terms[0]
        if coeff != 1 or len(mono) != 1 or mono[0][1] != 1 or mono[0][0].op != "var":
            continue
        quotient: Poly = {((Atom("floordiv", (x, c)), 1),): c}
        subs[mono[0][0]] = poly_add(quotient, r)
    if not subs:
        return None
    return _exact_division(_substitute(p, subs), _substitute(d, subs))


def _substitute(p: Poly, subs: Mapping[Atom, Poly]) -> Poly:
    """``p`` with each atom of ``subs`` replaced by its polynomial."""
    out: Poly = {}
    for mono, coeff in p.items():
        term: Poly = {(): coeff}
        for atom, e in mono:
            factor = subs.get(atom)
            if factor is None:
                term = poly_mul(term, {((atom, e),): 1})
                continue
            for _ in range(e):
                term = poly_mul(term, factor)
        out = poly_add(out, term)
    return out


def vanishes_if_divisible(p: Poly, divisible: Sequence[tuple[DimSize, int]]) -> bool:
    """Whether ``p`` is 0 once each ``x`` of ``divisible`` is a multiple of its ``c``
    (``mod(x, c) == 0``): ``16*b*floordiv(s, 2) - 8*b*s`` is, with ``(s, 2)``."""
    rules: dict[Atom, Poly] = {Atom("mod", (x, c)): {} for x, c in divisible}
    return not _substitute(_exact_quotients(dict(p), rules), rules)


def _exact_division(p: Poly, d: Poly) -> Poly | None:
    """The polynomial ``q`` with ``p == q * d`` exactly, or None (multivariate division)."""
    if not d:
        return None
    order = sorted(d.items(), key=_term_order)
    lead_m, lead_c = order[0]
    quot: Poly = {}
    rem = dict(p)
    for _ in range(64):
        if not rem:
            return quot
        m, c = min(rem.items(), key=_term_order)
        qm = _mono_div(m, lead_m)
        if qm is None or c % lead_c:
            return None
        step = {qm: c // lead_c}
        quot = poly_add(quot, step)
        rem = poly_add(rem, poly_mul(step, d), -1)
    return None


def _mono_div(m: Mono, d: Mono) -> Mono | None:
    left = dict(m)
    for a, e in d:
        have = left.get(a, 0)
        if have < e:
            return None
        if have == e:
            del left[a]
        else:
            left[a] = have - e
    return tuple(sorted(left.items(), key=lambda ae: ae[0].key))


def max_min(op: str, x: DimSize, y: DimSize) -> DimSize:
    if isinstance(x, int) and isinstance(y, int):
        return max(x, y) if op == "max" else min(x, y)
    scope = scope_of(x, y)
    assert scope is not None
    lo, hi = scope.bounds(sub(x, y))
    if lo >= 0:
        return x if op == "max" else y
    if hi <= 0:
        return y if op == "max" else x
    first, second = sorted((x, y), key=_key_of)
    return make({((Atom(op, (first, second)), 1),): 1}, scope)


def evaluate(x: DimSize, env: Mapping[str, int]) -> int:
    return x if isinstance(x, int) else x.evaluate(env)


def _collect_vars(x: DimSize, out: set[str]) -> None:
    if isinstance(x, int):
        return
    for mono, _ in x._terms:
        for atom, _ in mono:
            if atom.op == "var":
                out.add(atom.args[0])
            else:
                for a in atom.args:
                    _collect_vars(a, out)


# ---------------------------------------------------------------------------------------
# Printing


def _atom_str(a: Atom) -> str:
    if a.op == "var":
        return str(a.args[0])
    if a.op == "relu":  # internal to the bounds engine
        return f"max({a.args[0]}, 0)"
    return f"{a.op}({a.args[0]}, {a.args[1]})"


def _mono_str(m: Mono) -> str:
    return "*".join(_atom_str(a) if e == 1 else f"{_atom_str(a)}^{e}" for a, e in m)


def _poly_str(terms: Iterable[tuple[Mono, int]]) -> str:
    parts: list[str] = []
    for mono, coeff in terms:
        body = _mono_str(mono)
        mag = abs(coeff)
        text = str(mag) if not body else body if mag == 1 else f"{mag}*{body}"
        if not parts:
            parts.append(text if coeff > 0 else f"-{text}")
        else:
            parts.append(f"+ {text}" if coeff > 0 else f"- {text}")
    return " ".join(parts)


# Comparisons decide with the bounds engine, which builds on this module: imported last.
from shapevm.shapes import compare as _compare  # noqa: E402
