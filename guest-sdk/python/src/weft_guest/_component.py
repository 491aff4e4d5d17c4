"""The component's exports for a step module (componentize-py's ``WitWorld``).

``weft guest build`` generates the app module componentize-py builds::

    import step_module
    from weft_guest._component import world
    WitWorld = world(step_module, version="0.1.0", description="...")

Only importable inside componentize-py, where ``wit_world`` exists.
"""

from __future__ import annotations

import gc
import types as _pytypes

import wit_world
from componentize_py_types import Err
from wit_world.imports import host as wit_host
from wit_world.imports import types as wit

import weft_guest
from weft_guest import Context, Done, Step, StepError

_new_context = object.__new__

_LEVELS = {
    "trace": wit_host.Level.TRACE,
    "debug": wit_host.Level.DEBUG,
    "info": wit_host.Level.INFO,
    "warn": wit_host.Level.WARN,
    "error": wit_host.Level.ERROR,
}


class _Host:
    """The host's imports behind weft_guest's log, progress and artifact (called directly: no frame of ours between)."""

    log = staticmethod(lambda level, message: wit_host.log(_LEVELS[level], message))
    progress = staticmethod(wit_host.progress)
    progress_data = staticmethod(wit_host.progress_data)
    artifact = staticmethod(wit_host.artifact)


def find_step(module: _pytypes.ModuleType) -> Step:
    """The one :class:`Step` the module defines."""
    steps = [v for v in vars(module).values() if isinstance(v, Step)]
    if len(steps) != 1:
        found = ", ".join(s.name for s in steps) or "none"
        raise TypeError(f"{module.__name__} must define exactly one @step function, found: {found}")
    return steps[0]


def world(module: _pytypes.ModuleType, version: str | None = None, description: str | None = None) -> type:
    """A ``WitWorld`` class exporting ``describe`` and ``run`` for the module's step."""
    s = find_step(module)
    weft_guest._host = _Host()
    metadata = wit.Metadata(
        name=s.name,
        description=(s.description or description or "").strip(),
        version=s.version or version or "0.0.0",
        input_schema=s.input_schema,
        output_schema=s.output_schema,
    )

    class WitWorld(wit_world.WitWorld):
        def describe(self) -> wit.Metadata:
            return metadata

        def run(self, ctx: wit.Context, input: str) -> wit.Outcome:
            # A frozen dataclass's __init__ sets each field through
            # object.__setattr__; filling __dict__ at once is the same object.
            c = _new_context(Context)
            c.__dict__.update(
                run_id=ctx.run_id,
                step=ctx.step,
                attempt=ctx.attempt,
                idempotency_key=ctx.idempotency_key,
                deadline_ms=ctx.deadline_ms,
            )
            try:
                out = s.call(input, c)
            except StepError as e:
                raise Err(wit.StepError(code=e.code, message=e.message, retryable=e.retryable))
            if isinstance(out, Done):
                return wit.Outcome_Done(out.json)
            return wit.Outcome_Reject(out.reason)

    # Every invocation starts from the heap componentize-py snapshots after
    # this import. Frozen, that heap is out of the collector's sight: a
    # collection during a call then walks only what the call made, not
    # every module and function (which cost ~1.4 M fuel when one fell in a call).
    gc.collect()
    gc.freeze()
    return WitWorld
