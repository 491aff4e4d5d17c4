"""The SDK natively: schemas from type hints, validation naming the field,
error mapping, rejection, and the host functions on stderr.

Run: ``python3 -m unittest discover -s guest-sdk/python/tests``
"""

from __future__ import annotations

import contextlib
import enum
import io
import json
import sys
import unittest
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from weft_guest import (  # noqa: E402
    Context,
    Done,
    Reject,
    Rejected,
    StepError,
    artifact,
    log,
    progress,
    reject,
    step,
)


class Currency(enum.Enum):
    EUR = "EUR"
    USD = "USD"


@dataclass
class Item:
    """One line of an order."""

    sku: str
    qty: int = field(metadata={"description": "How many", "minimum": 0})


@dataclass
class Order:
    items: list[Item] = field(metadata={"minItems": 1})
    currency: Currency = Currency.EUR
    note: Optional[str] = None
    tags: dict[str, Annotated[float, {"minimum": 0}]] = field(default_factory=dict)


@dataclass
class Total:
    total: float
    currency: Currency
    attempt: int
    kind: Literal["order", "quote"] = "order"


@step(name="order-total")
def order_total(order: Order, ctx: Context) -> Total:
    """Sum an order.

    Second paragraph.
    """
    log(f"summing {len(order.items)} items")
    log("prices are made up", level="warn")
    progress("half way")
    artifact("note.txt", "text/plain", "hi")
    skus = {i.sku for i in order.items}
    if "spam" in skus:
        reject("spam order")
    if "busy" in skus:
        raise StepError("busy", "the price list is busy", retryable=True)
    if "boom" in skus:
        raise RuntimeError("kaboom")
    if "bad-out" in skus:
        return {"total": "many", "currency": order.currency, "attempt": 1}  # type: ignore[return-value]
    return Total(total=sum(i.qty * 2.5 for i in order.items), currency=order.currency, attempt=ctx.attempt)


@dataclass
class Tree:
    label: str
    children: list[Tree] = field(default_factory=list)


@step
def double(n: int) -> int:
    return n * 2


def quietly(f, *args):
    """Runs f with stderr captured; returns (result, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        return f(*args), err.getvalue()


class Metadata(unittest.TestCase):
    def test_schemas_come_from_the_type_hints(self):
        s = order_total
        self.assertEqual(s.name, "order-total")
        self.assertEqual(s.description, "Sum an order.\n\nSecond paragraph.")
        self.assertIsNone(s.version)
        inp = json.loads(s.input_schema)
        self.assertEqual(inp["$schema"], "https://json-schema.org/draft/2020-12/schema")
        self.assertEqual((inp["title"], inp["type"], inp["required"]), ("Order", "object", ["items"]))
        self.assertFalse(inp["additionalProperties"])
        items = inp["properties"]["items"]
        self.assertEqual((items["type"], items["minItems"], items["items"]), ("array", 1, {"$ref": "#/$defs/Item"}))
        item = inp["$defs"]["Item"]
        self.assertEqual(item["description"], "One line of an order.")
        self.assertEqual(item["properties"]["qty"], {"type": "integer", "description": "How many", "minimum": 0})
        self.assertEqual(inp["properties"]["currency"], {"title": "Currency", "enum": ["EUR", "USD"], "default": "EUR"})
        self.assertEqual(inp["properties"]["note"], {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None})
        self.assertEqual(inp["properties"]["tags"]["additionalProperties"], {"type": "number", "minimum": 0})
        out = json.loads(s.output_schema)
        self.assertEqual(out["required"], ["total", "currency", "attempt"])
        self.assertEqual(out["properties"]["kind"], {"enum": ["order", "quote"], "type": "string", "default": "order"})

    def test_defaults_and_plain_types(self):
        self.assertEqual(double.name, "double")
        self.assertEqual(json.loads(double.input_schema)["type"], "integer")
        self.assertEqual(double.call_json(21), 42)
        self.assertEqual(double(4), 8, "a step still calls as its function")

    def test_mistakes_say_what_to_write(self):
        with self.assertRaisesRegex(TypeError, "annotate the input parameter `x`"):
            step(name="x")(lambda x: x)
        with self.assertRaisesRegex(TypeError, "takes \\(input\\) or \\(input, ctx\\)"):

            @step
            def three(a: int, b: int, c: int) -> int:
                return a

        with self.assertRaisesRegex(TypeError, "name must be lower case"):
            step(name="Bad Name")(double.fn)
        with self.assertRaisesRegex(TypeError, "cannot derive a JSON Schema for <class 'complex'>"):

            @step
            def cx(z: complex) -> int:
                return 0

        with self.assertRaisesRegex(ValueError, "log level must be one of"):
            log("x", level="loud")


class Calls(unittest.TestCase):
    def test_parses_applies_defaults_and_returns_the_output(self):
        out, err = quietly(order_total.call_json, {"items": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 1}]})
        self.assertEqual(out, {"total": 7.5, "currency": "EUR", "attempt": 1, "kind": "order"})
        self.assertIn("[info] summing 2 items", err)
        self.assertIn("[warn] prices are made up", err)
        self.assertIn("[progress] half way", err)
        self.assertIn("[artifact] note.txt (text/plain, 2 bytes)", err)
        out, _ = quietly(order_total.call_json, {"items": [{"sku": "a", "qty": 0}], "currency": "USD"}, Context(attempt=3))
        self.assertEqual((out["currency"], out["attempt"]), ("USD", 3))

    def assertInvalid(self, value: Any, message: str):
        with self.assertRaises(StepError) as c:
            quietly(order_total.call_json, value)
        self.assertEqual((c.exception.code, c.exception.retryable), ("invalid_input", False))
        self.assertEqual(c.exception.message, message)

    def test_a_wrong_input_names_the_field(self):
        items = [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}, {"sku": "c", "qty": "x"}]
        self.assertInvalid({"items": items}, "input.items[2].qty: expected integer, got string")
        self.assertInvalid({"items": [{"qty": 1}]}, "input.items[0].sku: missing (expected string)")
        self.assertInvalid({"items": []}, "input.items: must have at least 1 item")
        self.assertInvalid({"items": [{"sku": "a", "qty": -1}]}, "input.items[0].qty: must be at least 0")
        self.assertInvalid({"items": [{"sku": "a", "qty": 1}], "currency": "GBP"}, "input.currency: expected one of 'EUR', 'USD', got 'GBP'")
        self.assertInvalid({"items": [{"sku": "a", "qty": 1}], "tags": {"a b": -1}}, 'input.tags["a b"]: must be at least 0')
        self.assertInvalid([1], "input: expected object, got array")
        self.assertInvalid({"items": [{"sku": "a", "qty": True}]}, "input.items[0].qty: expected integer, got boolean")
        self.assertInvalid(
            {"items": [{"sku": "a", "qty": 1}], "itmes": 1},
            "input: unknown field(s): itmes (expected: items, currency, note, tags)",
        )

    def test_text_that_is_not_json(self):
        for text in ['{"items": [', "NaN"]:
            with self.assertRaises(StepError) as c:
                order_total.call(text)
            self.assertEqual(c.exception.code, "invalid_input")
            self.assertTrue(c.exception.message.startswith("input is not JSON: "), c.exception.message)

    def test_reject_step_errors_exceptions_and_a_wrong_output(self):
        def one(sku):
            return {"items": [{"sku": sku, "qty": 1}]}

        outcome, _ = quietly(order_total.call, json.dumps(one("spam")))
        self.assertEqual(outcome, Reject("spam order"))
        with self.assertRaises(Rejected) as r:
            quietly(order_total.call_json, one("spam"))
        self.assertEqual(r.exception.reason, "spam order")
        with self.assertRaises(StepError) as c:
            quietly(order_total.call_json, one("busy"))
        self.assertEqual((c.exception.code, c.exception.retryable), ("busy", True))
        with self.assertRaises(StepError) as c:
            quietly(order_total.call_json, one("boom"))
        self.assertEqual(
            (c.exception.code, c.exception.message, c.exception.retryable),
            ("internal", "step order-total failed: RuntimeError: kaboom", False),
        )
        with self.assertRaises(StepError) as c:
            quietly(order_total.call_json, one("bad-out"))
        self.assertEqual((c.exception.code, c.exception.message), ("invalid_output", "output.total: expected number, got string"))

    def test_done_is_compact_json_text(self):
        out, _ = quietly(order_total.call, '{"items": [{"sku": "é", "qty": 4}]}')
        self.assertEqual(out, Done('{"total":10.0,"currency":"EUR","attempt":1,"kind":"order"}'))

    def test_nested_and_recursive_dataclasses(self):
        @step
        def count(t: Tree) -> int:
            return 1 + sum(count.fn(c) for c in t.children)

        self.assertEqual(count.call_json({"label": "a", "children": [{"label": "b"}, {"label": "c", "children": [{"label": "d"}]}]}), 4)
        schema = json.loads(count.input_schema)
        self.assertEqual(schema["properties"]["children"]["items"], {"$ref": "#/$defs/Tree"})
        with self.assertRaises(StepError) as c:
            count.call_json({"label": "a", "children": [{"label": 1}]})
        self.assertEqual(c.exception.message, "input.children[0].label: expected string, got number")


if __name__ == "__main__":
    unittest.main()
