"""``condition`` expressions of custom patterns: a small language, checked then interpreted.

A condition is parsed with :func:`ast.parse` and every node is checked against an allow-list
(comparisons, ``and``/``or``/``not``, arithmetic on numbers, ``x if c else y``, numeric and
string constants, known names, ``name['key']`` look-ups and a few pure functions). The checked
tree is then *interpreted* by the walker below: no ``eval``, no ``compile``, no attribute
access, so an expression can read the variables it is given and nothing else.

Evaluation never raises: a missing name, a type mismatch, a division by zero or a value that
grows too large makes the condition false (the trial then simply does not match).
"""

from __future__ import annotations

import ast
import math
import operator
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

from aorta_tui.core.errors import RecipeError

MAX_EXPR_CHARS = 512
MAX_NODES = 200
MAX_DEPTH = 32
MAX_INT = 10**18  # larger intermediate integers make the condition false
MAX_STR = 65_536  # string results longer than this make the condition false
MAX_NUMERIC_TEXT = 64  # int()/float() of a longer string is refused (no quadratic parsing)

_T = TypeVar("_T")


class _EvalFailure(Exception):
    """Raised inside the interpreter; :meth:`Condition.evaluate` turns it into False."""


def _num(value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _EvalFailure(f"not a number: {value!r}")
    return value


def _to_int(value: object) -> int:
    if isinstance(value, str):
        if len(value.strip()) > MAX_NUMERIC_TEXT:
            raise _EvalFailure("numeric text too long")
        return int(value.strip())
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _EvalFailure("not finite")
        return int(value)
    if isinstance(value, (int, bool)):
        return int(value)
    raise _EvalFailure(f"int() of {type(value).__name__}")


def _to_float(value: object) -> float:
    if isinstance(value, str):
        if len(value.strip()) > MAX_NUMERIC_TEXT:
            raise _EvalFailure("numeric text too long")
        return float(value.strip())
    if isinstance(value, (int, float, bool)):
        return float(value)
    raise _EvalFailure(f"float() of {type(value).__name__}")


def _to_str(value: object) -> str:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return str(value)
    raise _EvalFailure(f"str() of {type(value).__name__}")


def _minmax(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: object) -> object:
        if not args:
            raise _EvalFailure("min/max of nothing")
        if all(isinstance(a, str) for a in args):
            return fn(args)
        return fn(_num(a) for a in args)

    return call


def _length(value: object) -> int:
    if isinstance(value, (str, list, tuple, dict)):
        return len(value)
    raise _EvalFailure(f"len() of {type(value).__name__}")


def _round(value: object, digits: object = 0) -> float:
    d = _num(digits)
    if not isinstance(d, int) or not -20 <= d <= 20:
        raise _EvalFailure("round() digits out of range")
    return round(_num(value), d)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "float": _to_float,
    "int": _to_int,
    "str": _to_str,
    "bool": bool,
    "abs": lambda v: abs(_num(v)),
    "min": _minmax(min),
    "max": _minmax(max),
    "len": _length,
    "round": _round,
    # upstream AORTA's conditions call these through ``math.``; both spellings work
    "isnan": lambda v: math.isnan(_num(v)),
    "isinf": lambda v: math.isinf(_num(v)),
    "isfinite": lambda v: math.isfinite(_num(v)),
}
_MATH_FUNCTIONS = {"isnan", "isinf", "isfinite"}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: operator.contains(b, a),
    ast.NotIn: lambda a, b: not operator.contains(b, a),
}
_STRUCTURAL = (ast.Expression, ast.Load, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd,
               *_BINOPS, *_COMPARE)


@dataclass(frozen=True)
class Condition:
    """A checked condition. ``evaluate`` returns a bool and never raises."""

    source: str
    names: frozenset[str] | None
    tree: ast.Expression = field(repr=False, compare=False)

    def evaluate(self, variables: Mapping[str, Any]) -> bool:
        try:
            return bool(_Interpreter(variables).eval(self.tree.body))
        except Exception:  # any failure (including RecursionError, OverflowError) is "no"
            return False


def compile_condition(expr: str, *, names: set[str] | frozenset[str] | None = None) -> Condition:
    """Check ``expr`` against the allow-list. Raises :class:`RecipeError` when it is not allowed.

    ``names`` are the variables the expression may read (besides the functions); ``None``
    allows any name that does not start with an underscore.
    """
    if not isinstance(expr, str):
        raise RecipeError(f"a condition must be a string, got {type(expr).__name__}",
                          hint="quote the expression: condition: \"float(loss) > 10\"")
    text = expr.strip()
    if not text:
        raise RecipeError("the condition is empty", hint="write an expression such as "
                          "\"exit_code == 0 and float(capture['loss']) > 10\", or drop the key")
    if len(text) > MAX_EXPR_CHARS:
        raise RecipeError(f"the condition is {len(text)} characters; at most {MAX_EXPR_CHARS}",
                          hint="split the check into several custom patterns")
    try:
        with warnings.catch_warnings():  # "invalid escape" etc.: the checker decides, quietly
            warnings.simplefilter("ignore")
            tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise RecipeError(f"the condition is not a valid expression: {exc.msg} "
                          f"(column {exc.offset})",
                          hint="use Python expression syntax, e.g. float(x) > 1.5 and exit_code == 0"
                          ) from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        raise RecipeError(f"the condition cannot be parsed ({type(exc).__name__})",
                          hint="simplify the expression") from None
    allowed = frozenset(names) if names is not None else None
    _Checker(allowed).check(tree)
    return Condition(source=text, names=allowed, tree=tree)


class _Checker:
    def __init__(self, names: frozenset[str] | None) -> None:
        self.names = names
        self.count = 0

    def check(self, tree: ast.Expression) -> None:
        self._visit(tree, 0)

    def _reject(self, what: str, hint: str | None = None) -> NoReturn:
        raise RecipeError(f"the condition uses {what}, which conditions do not allow",
                          hint=hint or "conditions may use comparisons, and/or/not, + - * / // % "
                          "on numbers, names, 'strings', numbers, name['key'] and "
                          + ", ".join(sorted(FUNCTIONS)) + "()")

    def _visit(self, node: ast.AST, depth: int) -> None:
        self.count += 1
        if self.count > MAX_NODES or depth > MAX_DEPTH:
            raise RecipeError("the condition is too large or nests too deeply",
                              hint=f"at most {MAX_NODES} parts and {MAX_DEPTH} levels")
        if isinstance(node, ast.Name):
            self._check_name(node.id)
            return
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or value is None or isinstance(value, str):
                return
            if isinstance(value, int):
                if abs(value) > MAX_INT:
                    self._reject(f"the integer {value}", f"integers are at most {MAX_INT}")
                return
            if isinstance(value, float):
                return
            self._reject(f"a {type(value).__name__} constant")
        elif isinstance(node, ast.Call):
            self._check_call(node, depth)
            return
        elif isinstance(node, ast.Subscript):
            self._check_subscript(node, depth)
            return
        elif isinstance(node, ast.Attribute):
            self._reject(f"attribute access ('.{node.attr}')",
                         "only math.isnan/isinf/isfinite(...) may be written with a dot")
        elif isinstance(node, (ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp)):
            if isinstance(node, ast.BinOp) and type(node.op) not in _BINOPS:
                self._reject(f"the operator {type(node.op).__name__}")
        elif not isinstance(node, _STRUCTURAL):
            self._reject(_describe(node))
        for child in ast.iter_child_nodes(node):
            self._visit(child, depth + 1)

    def _check_name(self, name: str) -> None:
        if name.startswith("_"):
            self._reject(f"the name {name!r}", "names starting with '_' are not allowed")
        if name in FUNCTIONS or name == "math":
            self._reject(f"the function {name!r} without calling it")
        if self.names is not None and name not in self.names:
            from aorta_tui.core.suggest import did_you_mean

            raise RecipeError(
                f"the condition reads {name!r}, which is not defined here",
                hint=did_you_mean(name, self.names) + f"available: {', '.join(sorted(self.names))}")

    def _check_call(self, node: ast.Call, depth: int) -> None:
        func = node.func
        plain = isinstance(func, ast.Name) and func.id in FUNCTIONS
        dotted = (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                  and func.value.id == "math" and func.attr in _MATH_FUNCTIONS)
        if not (plain or dotted):
            target = ast.unparse(func) if isinstance(func, (ast.Name, ast.Attribute)) else \
                _describe(func)
            self._reject(f"a call of {target}")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            self._reject("keyword or * arguments")
        for arg in node.args:
            self._visit(arg, depth + 1)

    def _check_subscript(self, node: ast.Subscript, depth: int) -> None:
        index = node.slice
        if not (isinstance(index, ast.Constant) and isinstance(index.value, (str, int))
                and not isinstance(index.value, bool)):
            self._reject("an index that is not a literal string or integer",
                         "write capture['name'] with the group name in quotes")
        if isinstance(index.value, str) and index.value.startswith("_"):
            self._reject(f"the key {index.value!r}",
                         "keys starting with '_' are not allowed")
        self._visit(node.value, depth + 1)


def _describe(node: ast.AST) -> str:
    names = {
        ast.Lambda: "a lambda", ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
        ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator",
        ast.JoinedStr: "an f-string", ast.NamedExpr: "an assignment (:=)",
        ast.Starred: "a * expression", ast.List: "a list", ast.Tuple: "a tuple",
        ast.Dict: "a dict", ast.Set: "a set", ast.Slice: "a slice", ast.Await: "await",
        ast.Yield: "yield", ast.YieldFrom: "yield",
    }
    return names.get(type(node), f"a {type(node).__name__} expression")


class _Interpreter:
    def __init__(self, variables: Mapping[str, Any]) -> None:
        self.variables = variables

    def eval(self, node: ast.AST) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in self.variables:
                raise _EvalFailure(f"{node.id} is not set")
            return self.variables[node.id]
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                result: object = True
                for value in node.values:
                    result = self.eval(value)
                    if not result:
                        return result
                return result
            for value in node.values:
                result = self.eval(value)
                if result:
                    return result
            return result
        if isinstance(node, ast.UnaryOp):
            operand = self.eval(node.operand)
            if isinstance(node.op, ast.Not):
                return not operand
            number = _num(operand)
            return -number if isinstance(node.op, ast.USub) else +number
        if isinstance(node, ast.BinOp):
            return self._binop(node)
        if isinstance(node, ast.Compare):
            left = self.eval(node.left)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                right = self.eval(comparator)
                if isinstance(op, (ast.In, ast.NotIn)) and not isinstance(right, (str, list,
                                                                                  tuple, dict)):
                    raise _EvalFailure("'in' needs a string, list or mapping on the right")
                if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, str) and \
                        not isinstance(left, str):
                    raise _EvalFailure("'in' a string needs a string on the left")
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)
        if isinstance(node, ast.Call):
            return _bounded(FUNCTIONS[_called_name(node)](*[self.eval(a) for a in node.args]))
        if isinstance(node, ast.Subscript):
            container = self.eval(node.value)
            if not isinstance(node.slice, ast.Constant):  # the checker prevents this
                raise _EvalFailure(f"unexpected subscript {type(node.slice).__name__}")
            key = node.slice.value
            if isinstance(container, Mapping):
                if key not in container:
                    raise _EvalFailure(f"no key {key!r}")
                return container[key]
            if isinstance(container, (list, tuple, str)) and isinstance(key, int):
                return container[key]
            raise _EvalFailure("cannot index this value")
        raise _EvalFailure(f"unexpected {type(node).__name__}")  # the checker prevents this

    def _binop(self, node: ast.BinOp) -> object:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
            return _bounded(left + right)
        return _bounded(_BINOPS[type(node.op)](_num(left), _num(right)))


def _called_name(node: ast.Call) -> str:
    """``f`` of ``f(x)``, ``sqrt`` of ``math.sqrt(x)``: the only calls the checker lets through."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    raise _EvalFailure(f"unexpected call of {type(func).__name__}")  # the checker prevents this


def _bounded(value: _T) -> _T:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise _EvalFailure("integer too large")
    if isinstance(value, str) and len(value) > MAX_STR:
        raise _EvalFailure("string too long")
    return value
