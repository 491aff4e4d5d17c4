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

Check = Callable[[Any, str], Any]


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


def _constraints(meta: dict) -> Callable[[Any, str], None] | None:
    """A check of the enforced keywords in ``meta``, or None when there are none."""
    checks = []
    if "minimum" in meta:
        lo = meta["minimum"]
        checks.append(lambda v, p: v < lo and f"must be at least {lo}")
    if "maximum" in meta:
        hi = meta["maximum"]
        checks.append(lambda v, p: v > hi and f"must be at most {hi}")
    if "exclusiveMinimum" in meta:
        xlo = meta["exclusiveMinimum"]
        checks.append(lambda v, p: v <= xlo and f"must be more than {xlo}")
    if "exclusiveMaximum" in meta:
        xhi = meta["exclusiveMaximum"]
        checks.append(lambda v, p: v >= xhi and f"must be less than {xhi}")
    if "minLength" in meta:
        n = meta["minLength"]
        checks.append(lambda v, p: len(v) < n and f"must be at least {n} characters long")
    if "maxLength" in meta:
        m = meta["maxLength"]
        checks.append(lambda v, p: len(v) > m and f"must be at most {m} characters long")
    if "minItems" in meta:
        i = meta["minItems"]
        checks.append(lambda v, p: len(v) < i and f"must have at least {i} item{'s' if i != 1 else ''}")
    if "maxItems" in meta:
        j = meta["maxItems"]
        checks.append(lambda v, p: len(v) > j and f"must have at most {j} item{'s' if j != 1 else ''}")
    if "pattern" in meta:
        rx = re.compile(meta["pattern"])
        checks.append(lambda v, p: not rx.search(v) and f"must match {meta['pattern']!r}")
    if not checks:
        return None

    def check(value: Any, path: str) -> None:
        for c in checks:
            problem = c(value, path)
            if problem:
                raise Invalid(path, problem)

    return check


def _with(meta: dict, inner: Check) -> Check:
    extra = _constraints(meta)
    if extra is None:
        return inner

    def checked(value: Any, path: str) -> Any:
        out = inner(value, path)
        if value is not None:
            extra(value, path)
        return out

    return checked


def decoder(tp: Any) -> Check:
    """``decode(json_value, path)``: the value as ``tp`` (dataclasses built), or raises :class:`Invalid`."""
    return _coder(tp, decode=True, memo={})


def encoder(tp: Any) -> Check:
    """``encode(value, path)``: a JSON-ready value checked against ``tp``, or raises :class:`Invalid`."""
    return _coder(tp, decode=False, memo={})


def _expect(tp: Any, value: Any, path: str) -> Invalid:
    if value is None:
        return Invalid(path, f"expected {_describe(tp)}, got null")
    return Invalid(path, f"expected {_describe(tp)}, got {kind(value)}")


def _coder(tp: Any, decode: bool, memo: dict) -> Check:
    base, meta = _annotated(tp)
    return _with(meta, _plain_coder(base, decode, memo))


def _plain_coder(tp: Any, decode: bool, memo: dict) -> Check:  # noqa: C901 (one branch per kind)
    if tp is Any or tp is object:
        return lambda v, p: v
    if tp is str:
        def string(v, p):
            if not isinstance(v, str):
                raise _expect(tp, v, p)
            return v
        return string
    if tp is bool:
        def boolean(v, p):
            if not isinstance(v, bool):
                raise _expect(tp, v, p)
            return v
        return boolean
    if tp is int:
        def integer(v, p):
            if isinstance(v, bool) or not isinstance(v, int):
                if isinstance(v, float) and v.is_integer() and not decode:
                    return int(v)
                raise _expect(tp, v, p)
            return v
        return integer
    if tp is float:
        def number(v, p):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _expect(tp, v, p)
            if not math.isfinite(v):
                raise Invalid(p, f"expected a finite number, got {v}")
            return float(v) if decode else v
        return number
    if tp is _NONE or tp is None:
        def null(v, p):
            if v is not None:
                raise _expect(_NONE, v, p)
            return None
        return null
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = {m.value: m for m in tp}

        def member(v, p):
            if decode:
                if isinstance(v, (str, int, float)) and not isinstance(v, bool) and v in values:
                    return values[v]
            elif isinstance(v, tp):
                return v.value
            raise Invalid(p, f"expected {_describe(tp)}, got {v!r}")
        return member
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_coder(tp, decode, memo)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is list or tp is tuple or origin in (list, tuple):
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            items = [_coder(a, decode, memo) for a in args]

            def fixed(v, p):
                if not isinstance(v, (list, tuple)):
                    raise _expect(tp, v, p)
                if len(v) != len(items):
                    raise Invalid(p, f"expected {len(items)} items, got {len(v)}")
                out = [c(x, join(p, i)) for i, (c, x) in enumerate(zip(items, v))]
                return tuple(out) if decode else out
            return fixed
        item = _coder(args[0], decode, memo) if args else (lambda v, p: v)
        as_tuple = decode and (tp is tuple or origin is tuple)

        def array(v, p):
            if not isinstance(v, (list, tuple)) or (decode and isinstance(v, tuple)):
                raise _expect(tp, v, p)
            out = [item(x, join(p, i)) for i, x in enumerate(v)]
            return tuple(out) if as_tuple else out
        return array
    if tp is dict or origin is dict:
        value = _coder(args[1], decode, memo) if args else (lambda v, p: v)

        def mapping(v, p):
            if not isinstance(v, dict):
                raise _expect(tp, v, p)
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    raise Invalid(p, f"object keys must be strings, got {k!r}")
                out[k] = value(x, join(p, k))
            return out
        return mapping
    if origin is typing.Literal:
        allowed = list(args)

        def literal(v, p):
            for a in allowed:
                if type(v) is type(a) and v == a:
                    return v
            raise Invalid(p, f"expected {_describe(tp)}, got {v!r}")
        return literal
    if _is_union(tp):
        nullable = _NONE in args
        others = [a for a in args if a is not _NONE]
        coders = [_coder(a, decode, memo) for a in others]
        if len(coders) == 1:
            only = coders[0]

            def optional(v, p):
                return None if v is None and nullable else only(v, p)
            return optional

        def union(v, p):
            if v is None and nullable:
                return None
            for c in coders:
                try:
                    return c(v, p)
                except Invalid:
                    continue
            raise _expect(tp, v, p)
        return union
    raise _unsupported(tp)


def _dataclass_coder(cls: type, decode: bool, memo: dict) -> Check:
    key = (cls, decode)
    if key in memo:  # a recursive type: look the coder up when called
        return lambda v, p: memo[key](v, p)
    memo[key] = None
    hints = _hints(cls)
    fields = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        c = _with(dict(f.metadata), _coder(hints[f.name], decode, memo))
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        fields.append((f.name, c, has_default, _describe(hints[f.name])))
    names = {name for name, *_ in fields}

    def obj(v, p):
        if decode:
            if not isinstance(v, dict):
                raise _expect(cls, v, p)
            unknown = [k for k in v if k not in names]
            if unknown:
                expected = ", ".join(n for n, *_ in fields) or "none"
                raise Invalid(p, f"unknown field(s): {', '.join(unknown)} (expected: {expected})")
            kwargs = {}
            for name, c, has_default, what in fields:
                if name in v:
                    kwargs[name] = c(v[name], join(p, name))
                elif not has_default:
                    raise Invalid(join(p, name), f"missing (expected {what})")
            return cls(**kwargs)
        if isinstance(v, cls):
            return {name: c(getattr(v, name), join(p, name)) for name, c, _, _ in fields}
        if isinstance(v, dict):
            out = {}
            for name, c, has_default, what in fields:
                if name in v:
                    out[name] = c(v[name], join(p, name))
                elif not has_default:
                    raise Invalid(join(p, name), f"missing (expected {what})")
            return out
        raise Invalid(p, f"expected {cls.__name__}, got {type(v).__name__}")

    memo[key] = obj
    return obj
