"""Write weft code steps in Python: one typed function and one decorator.

```python
from dataclasses import dataclass, field
from weft_guest import Context, StepError, log, reject, step

@dataclass
class In:
    name: str = field(metadata={"description": "Who to greet"})
    times: int = field(default=1, metadata={"minimum": 1, "maximum": 10})

@dataclass
class Out:
    greeting: str

@step(name="hello", description="Greet someone")
def hello(input: In, ctx: Context) -> Out:
    log(f"attempt {ctx.attempt}")
    if input.name == "nobody":
        reject("nobody to greet")
    return Out(greeting=" ".join([f"Hello, {input.name}!"] * input.times))
```

What ``@step`` does:

- derives the JSON Schemas of the input and output from the type hints
  (dataclasses and typing; see ``weft_guest._types`` for what is supported);
- parses and checks the input JSON before the function runs: a mismatch is
  the step error ``invalid_input`` naming the field
  (``input.items[2].qty: expected number, got string``);
- turns the return value into the output JSON (checked against the return
  type: ``invalid_output`` otherwise), a raised :class:`StepError` into the
  step's error, :func:`reject` into a rejection of the whole run, and any
  other exception into the error ``internal``.

``weft guest build`` makes the component with componentize-py; the WIT stays
hidden. Natively, :meth:`Step.call_json` runs the whole step (for
``python -m unittest``) and ``log``, ``progress`` and ``artifact`` print to
stderr. Import what the step needs at the top of its module:
componentize-py keeps what is imported when it builds.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
from typing import Any, Callable, NoReturn

from . import _types

__all__ = [
    "Context",
    "Done",
    "Reject",
    "Rejected",
    "Step",
    "StepError",
    "artifact",
    "log",
    "progress",
    "reject",
    "step",
]

LEVELS = ("trace", "debug", "info", "warn", "error")


@dataclasses.dataclass(frozen=True)
class Context:
    """Who is running the step and until when (the defaults suit tests)."""

    #: The run this invocation belongs to (``r_...``); empty outside a run.
    run_id: str = ""
    #: The step's name in the workflow definition.
    step: str = ""
    #: Attempt number, from 1.
    attempt: int = 1
    #: ``<run_id>/<step>[/<item>]/<attempt>``: stable across crashes; use it to make a side effect happen once.
    idempotency_key: str = ""
    #: Wall-clock deadline of this attempt, milliseconds since the Unix epoch.
    deadline_ms: int = 2**64 - 1


class StepError(Exception):
    """A failure the step reports on purpose: ``raise StepError("not_found", "no such user")``.

    ``retryable=True`` when trying again may succeed (a busy upstream...).
    """

    def __init__(self, code: str, message: str, retryable: bool = False):
        super().__init__(f"{code}: {message}")
        self.code = str(code)
        self.message = str(message)
        self.retryable = bool(retryable)

    @classmethod
    def invalid_input(cls, message: str) -> "StepError":
        """The input is wrong: code ``invalid_input``, not retryable."""
        return cls("invalid_input", message)


class Rejected(Exception):
    """Raised by :func:`reject`: the whole run is rejected with ``reason``."""

    def __init__(self, reason: str):
        super().__init__(f"the step rejected the run: {reason}")
        self.reason = str(reason)


def reject(reason: str) -> NoReturn:
    """Reject the whole run with a reason (raises :class:`Rejected`)."""
    raise Rejected(reason)


@dataclasses.dataclass(frozen=True)
class Done:
    """A successful invocation: the output as JSON text."""

    json: str


@dataclasses.dataclass(frozen=True)
class Reject:
    """An invocation that rejected the run, with the reason."""

    reason: str


class _Stderr:
    """The host natively: everything on stderr."""

    def log(self, level: str, message: str) -> None:
        print(f"[{level}] {message}", file=sys.stderr)

    def progress(self, message: str) -> None:
        print(f"[progress] {message}", file=sys.stderr)

    def progress_data(self, message: str, data: str) -> None:
        print(f"[progress] {message} {data}", file=sys.stderr)

    def artifact(self, name: str, mime: str, data: bytes) -> None:
        print(f"[artifact] {name} ({mime}, {len(data)} bytes)", file=sys.stderr)


_host: Any = _Stderr()


def log(message: object, level: str = "info") -> None:
    """Log a line, kept with the step's attempt; ``level`` is one of trace, debug, info, warn, error."""
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    _host.log(level, str(message))


def progress(message: str, data: Any = None) -> None:
    """Report progress: a short status update shown for the running step.

    With ``data`` (anything ``json.dumps`` takes, e.g. ``{"done": 3, "of": 10}``)
    the run's events, MCP progress and the web view carry it too; over 16 KiB
    of JSON it is left out, with a warning in the step's log.
    """
    if data is None:
        _host.progress(str(message))
    else:
        _host.progress_data(str(message), json.dumps(data))


def artifact(name: str, mime: str, data: bytes | str) -> None:
    """Attach a named blob to the step's attempt: ``artifact("report.csv", "text/csv", text)``."""
    if isinstance(data, str):
        data = data.encode()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"artifact {name}: data must be bytes or str, not {type(data).__name__}")
    _host.artifact(str(name), str(mime), bytes(data))


def _reject_nan(constant: str) -> NoReturn:
    raise ValueError(f"{constant} is not JSON")


# Made once: json.loads and json.dumps with options build a new decoder or
# encoder on every call.
_DECODER = json.JSONDecoder(parse_constant=_reject_nan)
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class Step:
    """A code step made by :func:`step`; calling it calls the function itself."""

    def __init__(self, fn: Callable, name: str, description: str | None, version: str | None):
        if not isinstance(name, str) or not re.match(r"^[a-z0-9][a-z0-9_-]*$", name):
            raise TypeError(f"@step: name must be lower case letters, digits, '-' or '_' (such as 'hello'), not {name!r}")
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if len(params) not in (1, 2):
            raise TypeError(f"@step {fn.__qualname__}: the function takes (input) or (input, ctx), not {len(params)} parameters")
        hints = _types.typing.get_type_hints(fn, include_extras=True)
        if params[0].name not in hints:
            raise TypeError(f"@step {fn.__qualname__}: annotate the input parameter `{params[0].name}` with its type (a dataclass...)")
        self.fn = fn
        self.name = name
        self.takes_context = len(params) == 2
        self.input_type = hints[params[0].name]
        self.output_type = hints.get("return")
        self._decode = _types.decoder(self.input_type)
        self._encode = _types.encoder(self.output_type) if self.output_type is not None else None
        #: What ``describe`` returns (the version and description may come from pyproject.toml at build).
        self.description = description
        self.version = version
        self.input_schema = json.dumps(_types.schema_of(self.input_type))
        self.output_schema = json.dumps(_types.schema_of(self.output_type)) if self.output_type is not None else None
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<weft step {self.name!r}>"

    def call(self, text: str, ctx: Context | None = None) -> Done | Reject:
        """One invocation over JSON text, as the host makes it; raises :class:`StepError` on failure."""
        ctx = ctx or Context()
        text = text.strip()
        try:
            value = _DECODER.decode(text) if text else None
        except ValueError as e:
            raise StepError.invalid_input(f"input is not JSON: {e}") from None
        try:
            parsed = self._decode(value, "input")
        except _types.Invalid as e:
            raise StepError.invalid_input(str(e)) from None
        try:
            out = self.fn(parsed, ctx) if self.takes_context else self.fn(parsed)
        except Rejected as r:
            return Reject(r.reason)
        except StepError:
            raise
        except Exception as e:
            raise StepError("internal", f"step {self.name} failed: {type(e).__name__}: {e}") from e
        try:
            if self._encode is not None:
                out = self._encode(out, "output")
            return Done(_ENCODER.encode(out))
        except _types.Invalid as e:
            raise StepError("invalid_output", str(e)) from None
        except (TypeError, ValueError) as e:
            raise StepError("invalid_output", f"output: not JSON: {e}") from None

    def call_json(self, value: Any, ctx: Context | None = None) -> Any:
        """Runs the whole step on a JSON value (tests): the output as a JSON value.

        Raises :class:`StepError` when the step fails and :class:`Rejected` when it rejects the run.
        """
        outcome = self.call(json.dumps(value), ctx)
        if isinstance(outcome, Reject):
            raise Rejected(outcome.reason)
        return json.loads(outcome.json)


def step(
    fn: Callable | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    version: str | None = None,
) -> Any:
    """Declare a code step: ``@step(name="hello", description="...")`` on ``def f(input: In, ctx: Context) -> Out``.

    The name defaults to the function's (``_`` becomes ``-``), the description
    to its docstring, then to pyproject.toml's; the version to pyproject.toml's.
    """

    def make(f: Callable) -> Step:
        n = name if name is not None else f.__name__.replace("_", "-")
        d = description if description is not None else (inspect.cleandoc(f.__doc__) if f.__doc__ else None)
        return Step(f, n, d, version)

    return make(fn) if fn is not None else make
