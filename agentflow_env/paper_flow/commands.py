"""Running the executor's command blocks without ``exec``: a small evaluator over the forms AgentFlow's executor
writes, with the tool bound as ``tool``.

AgentFlow ``exec()``s each block in a fresh namespace ``{"tool": tool}`` and keeps the block's final value of
``execution``. This evaluator does the same for what its prompt elicits: assignments (also to several names
or a tuple), ``+=``, literals (strings, numbers, lists, tuples, dicts, sets), names bound earlier in the block,
string concatenation and repetition, f-strings with conversions and format specs, ``str.format`` and a few
other string methods, indexing, a handful of pure builtins (``str``, ``int``, ``float``, ``len``, ``list``,
``round``, ``min``, ``max``, ``sum``, ``abs``, ``sorted``), ``print(...)`` (ignored), comments, and any number
of ``tool.execute(...)`` calls. A name not bound raises :class:`NameError` with Python's message, as ``exec``
would. Anything else (imports, loops, attribute access outside the tool and string methods, other calls) is
a :class:`CommandError` saying which statement: model-written code is never run in-process.

Every operation is bounded before it runs (:mod:`agentflow_env.paper_flow.command_bounds`): sizes of strings
and containers, integer growth, format widths and precisions, joins, replaces, ``sum`` of lists, and the
block's total steps and work. A block over a bound is a :class:`CommandError` saying which; nothing is built
first, so a hostile block costs milliseconds and no memory.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from agentflow_env.paper_flow.command_bounds import MAX_BLOCK_CHARS, MAX_ITEMS, Budget, CommandError

__all__ = ["MAX_TEXT", "OPERATORS", "CommandError", "run_block"]

MAX_TEXT = MAX_ITEMS  # the largest string or list a block may build (``"x" * 10**12`` is refused)


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
# the -v0..-v2 paper envs' evaluator ran arithmetic only (powers, shifts and bit operations were refused); their
# scores stay comparable by keeping that set, and the -v3 ids run every operator AgentFlow's exec runs
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd)
OPERATORS = ("all", "arithmetic")
_BUILTINS: dict[str, Callable[..., Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "len": len,
    "list": list,
    "round": round,
    "min": min,
    "max": max,
    "sum": sum,
    "abs": abs,
    "sorted": sorted,
}
_STR_METHODS = {"format", "join", "strip", "lstrip", "rstrip", "lower", "upper", "title", "replace", "split"}
_PLAIN = (str, int, float, bool, type(None), list, tuple, dict, set)


class _Block:
    def __init__(self, execute: Callable[..., Any], operators: str = "all"):
        if operators not in OPERATORS:
            raise ValueError(f"operators={operators!r}; choose one of {', '.join(OPERATORS)}")
        self.execute = execute
        keep = (lambda op: True) if operators == "all" else (lambda op: op in _ARITHMETIC)
        self.binops = {op: fn for op, fn in _BINOPS.items() if keep(op)}
        self.unary = {op: fn for op, fn in _UNARY.items() if keep(op)}
        self.names: dict[str, Any] = {}
        self.budget = Budget()

    # ------------------------------------------------------------------ statements
    def run(self, tree: ast.Module) -> None:
        for stmt in tree.body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        self.budget.step()
        if isinstance(stmt, ast.Assign):
            value = self.expr(stmt.value)
            for target in stmt.targets:
                self.bind(target, value)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            if type(stmt.op) not in self.binops:
                raise CommandError(f"unsupported operator in {ast.unparse(stmt)[:80]!r}")
            self.names[stmt.target.id] = self.binop(stmt.op, self.name(stmt.target.id), self.expr(stmt.value))
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            self.bind(stmt.target, self.expr(stmt.value))
        elif isinstance(stmt, ast.Expr):
            call = stmt.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print":
                for arg in call.args:  # arguments are evaluated (a bad name fails as in Python); nothing printed
                    self.expr(arg)
                return
            if isinstance(call, ast.Constant):  # a docstring-like string on its own line
                return
            self.expr(call)
        elif isinstance(stmt, ast.Pass):
            return
        else:
            raise CommandError(f"unsupported statement {ast.unparse(stmt).splitlines()[0][:80]!r}")

    def bind(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(t, ast.Starred) for t in target.elts):
            items = self.budget.counted(list, [value], {})
            if len(items) != len(target.elts):
                raise ValueError(f"cannot unpack {len(items)} values into {len(target.elts)} names")
            for sub, item in zip(target.elts, items):
                self.bind(sub, item)
        else:
            raise CommandError(f"unsupported assignment target {ast.unparse(target)[:80]!r}")

    # ------------------------------------------------------------------ expressions
    def name(self, name: str) -> Any:
        if name in self.names:
            return self.names[name]
        if name == "tool":
            raise CommandError("the tool itself is only called (tool.execute(...)), not used as a value")
        raise NameError(f"name {name!r} is not defined")

    def binop(self, op: ast.operator, left: Any, right: Any) -> Any:
        """``left <op> right``, refused before it runs when its result would be over a bound."""
        self.budget.before_binop(type(op).__name__, left, right)
        return self.budget.checked(self.binops[type(op)](left, right))

    def expr(self, node: ast.expr) -> Any:
        budget = self.budget
        budget.step()
        if isinstance(node, ast.Constant):
            return budget.checked(node.value)
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.JoinedStr):
            return self.fstring(node)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and not any(isinstance(e, ast.Starred) for e in node.elts):
            items = [self.expr(e) for e in node.elts]
            return budget.checked({ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items))
        if isinstance(node, ast.Dict) and None not in node.keys:
            pairs = [(self.expr(k), self.expr(v)) for k, v in zip(node.keys, node.values)]  # type: ignore[arg-type]
            return budget.checked(dict(pairs))
        if isinstance(node, ast.BinOp) and type(node.op) in self.binops:
            return self.binop(node.op, self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in self.unary:
            return self.unary[type(node.op)](self.expr(node.operand))
        if isinstance(node, ast.Subscript):
            return self.expr(node.value)[self.index(node.slice)]  # a part of a value: no larger than it
        if isinstance(node, ast.Call):
            return self.call(node)
        raise CommandError(f"unsupported expression {ast.unparse(node)[:80]!r}")

    def index(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Slice):
            parts = (node.lower, node.upper, node.step)
            return slice(*(None if p is None else self.expr(p) for p in parts))
        return self.expr(node)

    def fstring(self, node: ast.JoinedStr) -> str:
        parts: list[str] = []
        total = 0
        for value in node.values:
            part = self.fstring_part(value)
            total += len(part)
            self.budget.need(total, "the f-string")
            parts.append(part)
        return "".join(parts)

    def fstring_part(self, node: ast.expr) -> str:
        if isinstance(node, ast.Constant):
            return str(node.value)
        if not isinstance(node, ast.FormattedValue):
            raise CommandError(f"unsupported f-string part {ast.unparse(node)[:80]!r}")
        value = self.expr(node.value)
        conversion = None if node.conversion == -1 else chr(node.conversion)
        value = self.budget.convert(value, conversion)
        spec = "" if node.format_spec is None else self.expr(node.format_spec)
        return self.budget.format_value(value, spec)

    def call(self, node: ast.Call) -> Any:
        args = self.arguments(node)
        func = node.func
        budget = self.budget
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "tool":
            if func.attr != "execute":
                raise CommandError(f"only tool.execute(...) is run, not tool.{func.attr}(...)")
            return self.execute(*args[0], **args[1])
        if isinstance(func, ast.Name) and func.id in _BUILTINS and func.id not in self.names:
            return budget.checked(self.builtin(func.id, *args))
        if isinstance(func, ast.Attribute) and func.attr in _STR_METHODS:
            owner = self.expr(func.value)
            if isinstance(owner, str) and all(isinstance(a, _PLAIN) for a in (*args[0], *args[1].values())):
                if func.attr == "format":
                    return budget.checked(budget.format_string(owner, *args))
                if func.attr == "join":
                    return budget.checked(budget.join(owner, *args[0], **args[1]))
                if func.attr == "replace":
                    return budget.checked(budget.replace(owner, *args[0], **args[1]))
                budget.charge(len(owner))  # the rest are linear in the string and at most triple it
                return budget.checked(getattr(owner, func.attr)(*args[0], **args[1]))
        raise CommandError(f"unsupported call {ast.unparse(node)[:80]!r}: only tool.execute(...) and plain builtins")

    def builtin(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        budget = self.budget
        if name == "str" and len(args) == 1 and not kwargs:
            return budget.text_of(args[0])
        if name == "sum":
            return budget.sum(*args, **kwargs)
        if name == "round":
            return budget.round(*args, **kwargs)
        return budget.counted(_BUILTINS[name], args, kwargs)

    def arguments(self, node: ast.Call) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.budget.counted(list, [self.expr(a.value)], {}))
            else:
                args.append(self.expr(a))
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            if k.arg is None:
                kwargs.update(self.expr(k.value))
            else:
                kwargs[k.arg] = self.expr(k.value)
        return args, kwargs


def run_block(block: str, execute: Callable[..., Any], *, operators: str = "all") -> Any:
    """The value ``execution`` holds after the block, as ``exec(block, {}, {"tool": tool})`` would leave it;
    ``execute`` is called for each ``tool.execute(...)``. ``None`` when the block never sets ``execution``.
    ``operators``: ``"all"`` (AgentFlow's exec: arithmetic, powers, shifts, bit operations) or ``"arithmetic"``
    (``+ - * / // %`` and signs: what the ``-v0``..``-v2`` paper envs ran, kept so their scores stay comparable).

    Raises what the block raises (``NameError`` for an unbound name, the tool's own exceptions, ``SyntaxError``
    for a block that does not parse) and :class:`CommandError` for forms outside the evaluator or over a bound.
    """
    if len(block) > MAX_BLOCK_CHARS:
        raise CommandError(f"the block is {len(block):,} characters long, over the limit of {MAX_BLOCK_CHARS:,}")
    try:
        tree = ast.parse(block, filename="<string>")  # exec's file name: the same SyntaxError text
        runner = _Block(execute, operators)
        runner.run(tree)
    except (RecursionError, MemoryError):
        raise CommandError("the block nests too deeply to evaluate; write it flat") from None
    return runner.names.get("execution")
