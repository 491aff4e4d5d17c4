"""JSON Schemas derived from type hints, and JSON values checked against them.

pydantic's core is a native extension that does not run inside
componentize-py's CPython, so the SDK reads dataclasses and typing hints
itself. Supported: ``str``, ``int``, ``float``, ``bool``, ``None``,
``list[T]``, ``tuple[T, ...]``, ``tuple[A, B]``, ``dict[str, T]``,
``Optional[T]`` / ``T | None`` and other unions, ``Literal[...]``, ``Enum``
subclasses, dataclasses (nested) and ``Any``. A dataclass field's
``metadata`` (``field(metadata={"description": ..., "minimum": 0})``) and the
dicts in ``Annotated[T, {...}]`` add JSON Schema keywords; these ones are
also enforced: ``minimum``, ``maximum``, ``exclusiveMinimum``,
``exclusiveMaximum``, ``minLength``, ``maxLength``, ``minItems``,
``maxItems`` and ``pattern``.

Decoders and encoders are built once per type (at import time, which
componentize-py snapshots) as closures, so an invocation only runs them.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import re
import types
import typing
from typing import Any, Callable

__all__ = ["Invalid", "schema_of", "decoder", "encoder", "kind", "join"]

_NONE = type(None)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Keys of field metadata that become JSON Schema keywords.
_KEYWORDS = {
    "description", "title", "examples", "deprecated", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
}


class Invalid(Exception):
    """A value that does not fit its type: where (``input.items[2].qty``) and why."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def join(path: str, key: str | int) -> str:
    """``input`` + ``qty`` is ``input.qty``; + 2 is ``input[2]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENT.match(key):
        return f"{path}.{key}"
    return f"{path}[{key!r}]".replace("'", '"')


def kind(value: Any) -> str:
    """The JSON kind of a Python value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _unsupported(tp: Any) -> TypeError:
    return TypeError(
        f"weft_guest: cannot derive a JSON Schema for {tp!r}: use str, int, float, bool, None, "
        "list[T], tuple[...], dict[str, T], Optional[T] or unions, Literal[...], an Enum, a dataclass or Any"
    )


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _annotated(tp: Any) -> tuple[Any, dict]:
    """``Annotated[T, {...}, ...]`` as ``(T, merged dicts)``; other types as ``(tp, {})``."""
    if typing.get_origin(tp) is typing.Annotated:
        base, *extra = typing.get_args(tp)
        meta: dict = {}
        for m in extra:
            if isinstance(m, dict):
                meta.update(m)
        return base, meta
    return tp, {}


def _hints(cls: type) -> dict:
    return typing.get_type_hints(cls, include_extras=True)


def _doc(cls: type) -> str | None:
    doc = cls.__doc__
    # A dataclass without a docstring gets its signature as __doc__.
    if not doc or doc.startswith(cls.__name__ + "("):
        return None
    return inspect.cleandoc(doc)


# ------------------------------------------------------------------ schema --


def schema_of(tp: Any) -> dict:
    """The JSON Schema (draft 2020-12) of ``tp``; dataclasses below the root go in ``$defs``."""
    defs: dict = {}
    base, meta = _annotated(tp)
    if dataclasses.is_dataclass(base):
        root = _object_schema(base, defs)
    else:
        root = _schema(base, defs)
    root.update({k: v for k, v in meta.items() if k in _KEYWORDS})
    out = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    out.update(root)
    if defs:
        out["$defs"] = defs
    return out


def _schema(tp: Any, defs: dict) -> dict:
    tp, meta = _annotated(tp)
    s = _plain_schema(tp, defs)
    if meta:
        s = dict(s)
        s.update({k: v for k, v in meta.items() if k in _KEYWORDS})
    return s


def _plain_schema(tp: Any, defs: dict) -> dict:
    if tp is Any or tp is object:
        return {}
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is _NONE or tp is None:
        return {"type": "null"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"title": tp.__name__, "enum": [m.value for m in tp]}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if tp.__name__ not in defs:
            defs[tp.__name__] = {}  # a placeholder: recursive types refer to it
            defs[tp.__name__] = _object_schema(tp, defs)
        return {"$ref": f"#/$defs/{tp.__name__}"}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is list or origin is list:
        return {"type": "array", "items": _schema(args[0], defs)} if args else {"type": "array"}
    if tp is tuple or origin is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            return {"type": "array", "items": _schema(args[0], defs)} if args else {"type": "array"}
        return {
            "type": "array",
            "prefixItems": [_schema(a, defs) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if tp is dict or origin is dict:
        if args and args[0] is not str:
            raise TypeError(f"weft_guest: JSON object keys are strings: use dict[str, ...], not {tp!r}")
        return {"type": "object", "additionalProperties": _schema(args[1], defs)} if args else {"type": "object"}
    if origin is typing.Literal:
        s: dict = {"enum": list(args)}
        kinds = {type(a) for a in args}
        if kinds == {str}:
            s["type"] = "string"
        return s
    if _is_union(tp):
        return {"anyOf": [_schema(a, defs) for a in args]}
    raise _unsupported(tp)


def _object_schema(cls: type, defs: dict) -> dict:
    hints = _hints(cls)
    props: dict = {}
    required = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        s = dict(_schema(hints[f.name], defs))
        s.update({k: v for k, v in f.metadata.items() if k in _KEYWORDS})
        if f.default is not dataclasses.MISSING:
            try:
                s["default"] = encoder(hints[f.name])(f.default, "default")
            except Invalid:
                pass
        elif f.default_factory is dataclasses.MISSING:
            required.append(f.name)
        props[f.name] = s
    out: dict = {"title": cls.__name__, "type": "object", "properties": props}
    doc = _doc(cls)
    if doc:
        out["description"] = doc
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


# --------------------------------------------------------------- checking --
#
# A coder is `code(value)`: the value converted (decoding: dataclasses built;
# encoding: JSON-ready), or it raises `_Miss`. Nothing on the way in builds a
# path: a container that sees `_Miss` come out of a child adds the child's
# key to it, so a value that fits costs no string work, and the path
# (`input.items[2].qty`) is only made for the error. Inside componentize-py's
# interpreter every call and string is paid for in each invocation.

Code = Callable[[Any], Any]
Check = Callable[[Any, str], Any]


class _Miss(Exception):
    """A value that does not fit, with the keys from the innermost container out."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
        self.keys: list[str | int] = []

    def under(self, key: str | int) -> "_Miss":
        self.keys.append(key)
        return self

    def at(self, root: str) -> Invalid:
        path = root
        for k in reversed(self.keys):
            path = join(path, k)
        return Invalid(path, self.message)


def _describe(tp: Any) -> str:
    """A type in words, for "expected ..." messages."""
    tp, _ = _annotated(tp)
    names = {str: "string", int: "integer", float: "number", bool: "boolean", _NONE: "null"}
    for t, name in names.items():
        if tp is t:
            return name
    if dataclasses.is_dataclass(tp) or tp is dict or typing.get_origin(tp) is dict:
        return "object"
    if tp is list or tp is tuple or typing.get_origin(tp) in (list, tuple):
        return "array"
    if _is_union(tp):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(repr(m.value) for m in tp)
    return "any value"


def _constraints(meta: dict) -> Callable[[Any], None] | None:
    """A check of the enforced keywords in ``meta``, or None when there are none."""
    checks = []
    if "minimum" in meta:
        lo = meta["minimum"]
        checks.append(lambda v: v < lo and f"must be at least {lo}")
    if "maximum" in meta:
        hi = meta["maximum"]
        checks.append(lambda v: v > hi and f"must be at most {hi}")
    if "exclusiveMinimum" in meta:
        xlo = meta["exclusiveMinimum"]
        checks.append(lambda v: v <= xlo and f"must be more than {xlo}")
    if "exclusiveMaximum" in meta:
        xhi = meta["exclusiveMaximum"]
        checks.append(lambda v: v >= xhi and f"must be less than {xhi}")
    if "minLength" in meta:
        n = meta["minLength"]
        checks.append(lambda v: len(v) < n and f"must be at least {n} characters long")
    if "maxLength" in meta:
        m = meta["maxLength"]
        checks.append(lambda v: len(v) > m and f"must be at most {m} characters long")
    if "minItems" in meta:
        i = meta["minItems"]
        checks.append(lambda v: len(v) < i and f"must have at least {i} item{'s' if i != 1 else ''}")
    if "maxItems" in meta:
        j = meta["maxItems"]
        checks.append(lambda v: len(v) > j and f"must have at most {j} item{'s' if j != 1 else ''}")
    if "pattern" in meta:
        rx = re.compile(meta["pattern"])
        checks.append(lambda v: not rx.search(v) and f"must match {meta['pattern']!r}")
    if not checks:
        return None

    def check(value: Any) -> None:
        for c in checks:
            problem = c(value)
            if problem:
                raise _Miss(problem)

    return check


def _with(meta: dict, inner: Code) -> Code:
    extra = _constraints(meta)
    if extra is None:
        return inner

    def checked(value: Any) -> Any:
        out = inner(value)
        if value is not None:
            extra(value)
        return out

    return checked


def _public(code: Code) -> Check:
    def run(value: Any, path: str) -> Any:
        try:
            return code(value)
        except _Miss as e:
            raise e.at(path) from None

    return run


def decoder(tp: Any) -> Check:
    """``decode(json_value, path)``: the value as ``tp`` (dataclasses built), or raises :class:`Invalid`."""
    return _public(_coder(tp, decode=True, memo={}))


def encoder(tp: Any) -> Check:
    """``encode(value, path)``: a JSON-ready value checked against ``tp``, or raises :class:`Invalid`."""
    return _public(_coder(tp, decode=False, memo={}))


def _expect(tp: Any, value: Any) -> _Miss:
    if value is None:
        return _Miss(f"expected {_describe(tp)}, got null")
    return _Miss(f"expected {_describe(tp)}, got {kind(value)}")


def _coder(tp: Any, decode: bool, memo: dict) -> Code:
    base, meta = _annotated(tp)
    return _with(meta, _plain_coder(base, decode, memo))


# The keywords a generated check writes inline, by the kind of value they bound.
_BOUNDS = {
    "number": {"minimum": "<", "maximum": ">", "exclusiveMinimum": "<=", "exclusiveMaximum": ">="},
    "length": {"minLength": "<", "maxLength": ">"},
    "items": {"minItems": "<", "maxItems": ">"},
}
_ENFORCED = {k for group in _BOUNDS.values() for k in group} | {"pattern"}


@dataclasses.dataclass(frozen=True)
class _Plain:
    """A value a generated function checks inline: str, bool, int or float, maybe a list of them, maybe null."""

    base: type
    nullable: bool = False
    item: "_Plain | None" = None  # for a list: its items
    bounds: tuple = ()  # (operator that means "out of bounds", limit)


def _plain(tp: Any, meta: dict | None = None) -> _Plain | None:
    """How to check ``tp`` (with a dataclass field's ``meta``) inline, or None when it takes the coder."""
    base, extra = _annotated(tp)
    keywords = {k: v for k, v in {**extra, **(meta or {})}.items() if k in _ENFORCED}
    nullable = False
    if _is_union(base):
        args = [a for a in typing.get_args(base) if a is not _NONE]
        if len(args) != 1 or len(args) == len(typing.get_args(base)):
            return None
        nullable = True
        base, inner = _annotated(args[0])
        keywords.update({k: v for k, v in inner.items() if k in _ENFORCED})
    item = None
    if base in (int, float):
        group = "number"
    elif base is str:
        group = "length"
    elif base is bool:
        group = None
    elif typing.get_origin(base) is list and typing.get_args(base):
        item = _plain(typing.get_args(base)[0])
        if item is None or item.item is not None or item.bounds:
            return None
        base, group = list, "items"
    else:
        return None
    allowed = _BOUNDS.get(group, {}) if group else {}
    if any(k not in allowed for k in keywords):
        return None
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in keywords.values()):
        return None
    bounds = tuple((allowed[k], v) for k, v in keywords.items())
    return _Plain(base, nullable, item, bounds)


def _inline(var: str, plan: _Plain, decode: bool, miss: str, depth: int = 0) -> list[str]:
    """Source lines that leave ``var`` as the coder would, or run ``miss`` when they cannot tell."""
    tp = plan.base
    if tp is float:
        # x - x is 0.0 for a finite float only (nan and inf give nan); an
        # int is a number too (a float once decoded).
        lines = [
            f"if type({var}) is float:",
            f"    if {var} - {var} != 0.0: {miss}",
            f"elif type({var}) is int: {var} = float({var})" if decode else f"elif type({var}) is int: pass",
            f"else: {miss}",
        ]
    elif tp is list:
        item, out = f"e{depth}", f"a{depth}"
        lines = [
            f"if type({var}) is not list: {miss}",
            f"{out} = []",
            f"for {item} in {var}:",
            *("    " + line for line in _inline(item, plan.item, decode, miss, depth + 1)),
            f"    {out}.append({item})",
            f"{var} = {out}",
        ]
    else:
        lines = [f"if type({var}) is not {tp.__name__}: {miss}"]
    for op, limit in plan.bounds:
        measured = var if tp in (int, float) else f"len({var})"
        lines.append(f"if {measured} {op} {limit!r}: {miss}")
    if plan.nullable:
        lines = [f"if {var} is not None:"] + ["    " + line for line in lines]
    return lines


def _generate(name: str, lines: list[str], env: dict) -> Code:
    """A function made from source, as ``dataclasses`` makes ``__init__``: no call per field."""
    source = "\n".join(lines)
    exec(compile(source, f"<weft_guest {name}>", "exec"), env)  # noqa: S102 (our own source)
    made = env[name]
    made.slow = env["slow"]  # for the tests that hold the two against each other
    return made


def _fast_array(item_tp: Any, decode: bool, slow: Code) -> Code:
    """``slow`` (an array coder), with arrays of plain items checked in one loop first."""
    plan = _plain(list[item_tp])  # type: ignore[valid-type]
    if plan is None:
        return slow
    lines = ["def fast(v):", *("    " + line for line in _inline("v", plan, decode, "return slow(v)")), "    return v"]
    return _generate("fast", lines, {"slow": slow})


def _plain_coder(tp: Any, decode: bool, memo: dict) -> Code:  # noqa: C901 (one branch per kind)
    if tp is Any or tp is object:
        return lambda v: v
    if tp is str:
        def string(v):
            if not isinstance(v, str):
                raise _expect(tp, v)
            return v
        return string
    if tp is bool:
        def boolean(v):
            if not isinstance(v, bool):
                raise _expect(tp, v)
            return v
        return boolean
    if tp is int:
        def integer(v):
            if isinstance(v, bool) or not isinstance(v, int):
                if isinstance(v, float) and v.is_integer() and not decode:
                    return int(v)
                raise _expect(tp, v)
            return v
        return integer
    if tp is float:
        def number(v):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _expect(tp, v)
            if not math.isfinite(v):
                raise _Miss(f"expected a finite number, got {v}")
            return float(v) if decode else v
        return number
    if tp is _NONE or tp is None:
        def null(v):
            if v is not None:
                raise _expect(_NONE, v)
            return None
        return null
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = {m.value: m for m in tp}

        def member(v):
            if decode:
                if isinstance(v, (str, int, float)) and not isinstance(v, bool) and v in values:
                    return values[v]
            elif isinstance(v, tp):
                return v.value
            raise _Miss(f"expected {_describe(tp)}, got {v!r}")
        return member
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_coder(tp, decode, memo)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is list or tp is tuple or origin in (list, tuple):
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            items = [_coder(a, decode, memo) for a in args]

            def fixed(v):
                if not isinstance(v, (list, tuple)):
                    raise _expect(tp, v)
                if len(v) != len(items):
                    raise _Miss(f"expected {len(items)} items, got {len(v)}")
                out = []
                for i, (c, x) in enumerate(zip(items, v)):
                    try:
                        out.append(c(x))
                    except _Miss as e:
                        raise e.under(i)
                return tuple(out) if decode else out
            return fixed
        item = _coder(args[0], decode, memo) if args else (lambda v: v)
        as_tuple = decode and (tp is tuple or origin is tuple)

        def array(v):
            if not isinstance(v, (list, tuple)) or (decode and isinstance(v, tuple)):
                raise _expect(tp, v)
            try:
                out = [item(x) for x in v]
            except _Miss:
                # Which item: the first that does not fit (made again, the slow way, for the message).
                for i, x in enumerate(v):
                    try:
                        item(x)
                    except _Miss as e:
                        raise e.under(i) from None
                raise
            return tuple(out) if as_tuple else out
        return array if as_tuple or not args else _fast_array(args[0], decode, array)
    if tp is dict or origin is dict:
        value = _coder(args[1], decode, memo) if args else (lambda v: v)

        def mapping(v):
            if not isinstance(v, dict):
                raise _expect(tp, v)
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    raise _Miss(f"object keys must be strings, got {k!r}")
                try:
                    out[k] = value(x)
                except _Miss as e:
                    raise e.under(k)
            return out
        return mapping
    if origin is typing.Literal:
        allowed = list(args)

        def literal(v):
            for a in allowed:
                if type(v) is type(a) and v == a:
                    return v
            raise _Miss(f"expected {_describe(tp)}, got {v!r}")
        return literal
    if _is_union(tp):
        nullable = _NONE in args
        others = [a for a in args if a is not _NONE]
        coders = [_coder(a, decode, memo) for a in others]
        if len(coders) == 1:
            only = coders[0]

            def optional(v):
                return None if v is None and nullable else only(v)
            return optional

        def union(v):
            if v is None and nullable:
                return None
            for c in coders:
                try:
                    return c(v)
                except _Miss:
                    continue
            raise _expect(tp, v)
        return union
    raise _unsupported(tp)


def _dataclass_coder(cls: type, decode: bool, memo: dict) -> Code:
    key = (cls, decode)
    if key in memo:  # a recursive type: look the coder up when called
        return lambda v: memo[key](v)
    memo[key] = None
    hints = _hints(cls)
    fields = []
    plans = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = hints[f.name]
        meta = dict(f.metadata)
        c = _with(meta, _coder(tp, decode, memo))
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        fields.append((f.name, c, has_default, _describe(tp)))
        plans.append(_plain(tp, meta))
    names = frozenset(name for name, *_ in fields)
    required = frozenset(name for name, _, has_default, _ in fields if not has_default)

    def fields_in_order(v: Any, read: Callable[[Any, str], Any], present: Callable[[Any, str], bool]) -> dict:
        """The fields of ``v`` one by one: the first problem in field order (missing or wrong) is raised."""
        out = {}
        for name, c, has_default, what in fields:
            if present(v, name):
                try:
                    out[name] = c(read(v, name))
                except _Miss as e:
                    raise e.under(name)
            elif not has_default:
                raise _Miss(f"missing (expected {what})").under(name)
        return out

    # The precise path: what the generated one below hands over when it
    # cannot tell (a problem, a subclass), and the errors' wording.
    def obj(v):
        if decode:
            if not isinstance(v, dict):
                raise _expect(cls, v)
            if not names.issuperset(v):
                unknown = [k for k in v if k not in names]
                expected = ", ".join(n for n, *_ in fields) or "none"
                raise _Miss(f"unknown field(s): {', '.join(unknown)} (expected: {expected})")
            return cls(**fields_in_order(v, dict.__getitem__, dict.__contains__))
        if isinstance(v, cls):
            return fields_in_order(v, getattr, lambda v, name: True)  # every field, as the instance has them
        if isinstance(v, dict):
            return fields_in_order(v, dict.__getitem__, dict.__contains__)
        raise _Miss(f"expected {cls.__name__}, got {type(v).__name__}")

    fast = _fast_dataclass(cls, decode, fields, plans, names, required, obj)
    memo[key] = fast
    return fast


def _fast_dataclass(cls: type, decode: bool, fields: list, plans: list, names: frozenset, required: frozenset, slow: Code) -> Code:
    """``slow`` (a dataclass coder), with a generated function first that checks plain fields inline.

    It only ever returns what ``slow`` would; on anything it cannot tell it
    hands the whole value to ``slow``, which raises the precise error.
    """
    env: dict = {"slow": slow, "cls": cls, "names": names, "required": required, "_Miss": _Miss}
    miss = "return slow(v)"
    if decode:
        lines = [
            "def fast(v):",
            "    if type(v) is not dict or not names.issuperset(v) or not required.issubset(v): return slow(v)",
            "    kw = {}",
        ]
    else:
        lines = ["def fast(v):", "    if type(v) is not cls: return slow(v)"]
    outs = []
    for i, ((name, c, has_default, _), plan) in enumerate(zip(fields, plans)):
        x = f"x{i}"
        env[f"c{i}"] = c
        body = [f"{x} = v[{name!r}]" if decode else f"{x} = v.{name}"]
        if plan is not None:
            body += _inline(x, plan, decode, miss)
        else:
            body += ["try:", f"    {x} = c{i}({x})", "except _Miss:", f"    {miss}"]
        if decode:
            body.append(f"kw[{name!r}] = {x}")
            if has_default:
                body = [f"if {name!r} in v:"] + ["    " + line for line in body]
        lines += ["    " + line for line in body]
        outs.append(f"{name!r}: {x}")
    lines.append("    return cls(**kw)" if decode else "    return {" + ", ".join(outs) + "}")
    return _generate("fast", lines, env)
