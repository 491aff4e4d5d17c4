"""A weft code step in Python: summary statistics of a list of numbers.

Built into a WebAssembly component for the `step` world (wit/step.wit) by
build.sh with componentize-py.

Input:  {"numbers": [1, 2, 3.5, ...], "precision": 6}
Output: {"count", "sum", "mean", "median", "min", "max", "stdev",
         "variance", "quartiles", "mode"}  (stdev and variance need two values)
"""

import heapq  # noqa: F401  statistics.mode needs it; componentize-py bundles only what is imported
import json
import math
import statistics

import wit_world
from componentize_py_types import Err
from wit_world.imports import host
from wit_world.imports.types import Context, Metadata, Outcome, Outcome_Done, StepError

VERSION = "0.1.0"

INPUT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "StatsInput",
    "type": "object",
    "properties": {
        "numbers": {
            "type": "array",
            "items": {"type": "number"},
            "minItems": 1,
            "description": "The sample.",
        },
        "precision": {
            "type": "integer",
            "minimum": 0,
            "maximum": 15,
            "default": 6,
            "description": "Decimal places the results are rounded to.",
        },
    },
    "required": ["numbers"],
    "additionalProperties": False,
}

NUMBER_OR_NULL = {"type": ["number", "null"]}
OUTPUT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "StatsOutput",
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "sum": {"type": "number"},
        "mean": {"type": "number"},
        "median": {"type": "number"},
        "min": {"type": "number"},
        "max": {"type": "number"},
        "stdev": NUMBER_OR_NULL,
        "variance": NUMBER_OR_NULL,
        "quartiles": {"type": ["array", "null"], "items": {"type": "number"}},
        "mode": {"type": "number"},
    },
    "required": ["count", "sum", "mean", "median", "min", "max", "stdev", "variance", "quartiles", "mode"],
}


def invalid(message: str) -> Err:
    return Err(StepError(code="invalid_input", message=message, retryable=False))


def parse(text: str) -> tuple[list[float], int]:
    try:
        req = json.loads(text)
    except json.JSONDecodeError as e:
        raise invalid(f"input is not JSON: {e}")
    if not isinstance(req, dict):
        raise invalid("input must be a JSON object")
    numbers = req.get("numbers")
    if not isinstance(numbers, list) or not numbers:
        raise invalid('"numbers" must be a non-empty array of numbers')
    for i, x in enumerate(numbers):
        # bool is an int in Python; NaN and Infinity are not JSON numbers.
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise invalid(f'"numbers"[{i}] is not a finite number: {json.dumps(x)}')
    precision = req.get("precision", 6)
    if isinstance(precision, bool) or not isinstance(precision, int) or not 0 <= precision <= 15:
        raise invalid('"precision" must be an integer from 0 to 15')
    return numbers, precision


def summarise(numbers: list[float], precision: int) -> dict:
    def r(x):
        if x is None:
            return None
        x = round(x, precision)
        # Whole numbers print as integers: 2 rather than 2.0.
        return int(x) if float(x).is_integer() and abs(x) < 2**53 else x

    many = len(numbers) >= 2
    return {
        "count": len(numbers),
        "sum": r(math.fsum(numbers)),
        "mean": r(statistics.fmean(numbers)),
        "median": r(statistics.median(numbers)),
        "min": r(min(numbers)),
        "max": r(max(numbers)),
        "stdev": r(statistics.stdev(numbers)) if many else None,
        "variance": r(statistics.variance(numbers)) if many else None,
        "quartiles": [r(q) for q in statistics.quantiles(numbers, n=4)] if many else None,
        "mode": r(statistics.mode(numbers)),
    }


class WitWorld(wit_world.WitWorld):
    def describe(self) -> Metadata:
        return Metadata(
            name="stats",
            description="Summary statistics (mean, median, spread, quartiles) of a list of numbers.",
            version=VERSION,
            input_schema=json.dumps(INPUT_SCHEMA),
            output_schema=json.dumps(OUTPUT_SCHEMA),
        )

    def run(self, ctx: Context, input: str) -> Outcome:
        numbers, precision = parse(input)
        host.log(host.Level.INFO, f"step {ctx.step} attempt {ctx.attempt}: {len(numbers)} numbers")
        host.progress(f"summarising {len(numbers)} numbers")
        try:
            out = summarise(numbers, precision)
        except Exception as e:  # any other exception would trap the component
            raise Err(StepError(code="internal", message=f"stats failed: {e!r}", retryable=False))
        if out["stdev"] is None:
            host.log(host.Level.WARN, "one number: no stdev, variance or quartiles")
        return Outcome_Done(json.dumps(out))
