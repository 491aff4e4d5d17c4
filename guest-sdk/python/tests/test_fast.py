"""The generated coders against the closures they stand in front of: on every
value, both return the same thing or fail with the same message at the same
path; and on plain values the generated one answers without the closures.

Run: ``python3 -m unittest discover -s guest-sdk/python/tests``
"""

from __future__ import annotations

import copy
import random
import sys
import unittest
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from weft_guest import _types  # noqa: E402


@dataclass
class Inner:
    sku: str
    qty: int = field(metadata={"minimum": 0})


@dataclass
class Sample:
    numbers: list[float] = field(metadata={"minItems": 1})
    name: str
    ratio: float
    count: int
    flag: bool
    maybe: Optional[float]
    items: list[Inner]
    tags: Optional[list[str]] = None
    precision: int = field(default=6, metadata={"minimum": 0, "maximum": 15})
    note: str = field(default="none", metadata={"maxLength": 4})
    score: Annotated[Optional[float], {"minimum": 0, "exclusiveMaximum": 1}] = None
    code: str = field(default="a", metadata={"pattern": "^[a-z]$"})


VALID = {
    "numbers": [1, 2.5, -3],
    "name": "x",
    "ratio": 0.5,
    "count": 3,
    "flag": True,
    "maybe": None,
    "items": [{"sku": "a", "qty": 1}],
    "tags": ["t"],
}
ODD = [None, True, False, 0, 1, -1, 0.5, 2.0, 2.5, "abcde", "Z", ["a"] * 20, float("inf"), float("nan"), "", "s", [], [1], {}, {"sku": "a"}, 10**20]


def mutations(rng: random.Random, count: int) -> list[Any]:
    out = [copy.deepcopy(VALID)]
    for _ in range(count):
        v = copy.deepcopy(VALID)
        key = rng.choice(list(Sample.__dataclass_fields__) + ["extra"])
        r = rng.random()
        if r < 0.25:
            v.pop(key, None)
        elif r < 0.5 and isinstance(v.get(key), list) and v[key]:
            v[key][rng.randrange(len(v[key]))] = rng.choice(ODD)
        else:
            v[key] = copy.deepcopy(rng.choice(ODD))
        out.append(v)
    return out


def outcome(code: _types.Code, value: Any) -> tuple:
    try:
        return ("ok", code(copy.deepcopy(value)))
    except _types._Miss as e:
        return ("miss", str(e.at("input")))


class GeneratedCoders(unittest.TestCase):
    def test_decode_matches_the_closures(self):
        fast = _types._coder(Sample, decode=True, memo={})
        self.assertTrue(hasattr(fast, "slow"), "Sample gets a generated decoder")
        rng = random.Random(7)
        values = mutations(rng, 600)
        ok = 0
        for v in values:
            want, got = outcome(fast.slow, v), outcome(fast, v)
            self.assertEqual(got, want, v)
            ok += want[0] == "ok"
        self.assertTrue(10 < ok < len(values) - 10, f"{ok} of {len(values)} decoded")

    def test_encode_matches_the_closures(self):
        decode = _types._coder(Sample, decode=True, memo={})
        fast = _types._coder(Sample, decode=False, memo={})
        rng = random.Random(11)
        good = decode(copy.deepcopy(VALID))
        for _ in range(400):
            s = copy.deepcopy(good)
            name = rng.choice(list(Sample.__dataclass_fields__))
            if rng.random() < 0.7:
                setattr(s, name, copy.deepcopy(rng.choice(ODD)))
            self.assertEqual(outcome(fast, s), outcome(fast.slow, s), (name, getattr(s, name)))
        self.assertEqual(fast(good)["numbers"], [1.0, 2.5, -3.0])

    def test_plain_values_do_not_reach_the_closures(self):
        fast = _types._coder(Sample, decode=True, memo={})
        calls = []
        slow = fast.slow
        fast.__globals__["slow"] = lambda v: calls.append(v) or slow(v)
        try:
            fast(copy.deepcopy(VALID))
            self.assertEqual(calls, [])
            with self.assertRaises(_types._Miss):
                fast({**VALID, "count": "3"})
            self.assertEqual(len(calls), 1)
        finally:
            fast.__globals__["slow"] = slow

    def test_arrays_of_plain_items(self):
        for tp, decode, value, want in [
            (list[float], True, [1, 2.5], [1.0, 2.5]),
            (list[float], False, [1, 2.5], [1, 2.5]),
            (list[int], True, [1, 2], [1, 2]),
            (list[Optional[str]], True, ["a", None], ["a", None]),
        ]:
            code = _types._coder(tp, decode=decode, memo={})
            got = code(value)
            self.assertEqual(got, want)
            self.assertEqual([type(x) for x in got], [type(x) for x in want])
        code = _types._coder(list[int], decode=True, memo={})
        for bad in ([1, True], [1, 2.0], [1, None], "x"):
            self.assertEqual(outcome(code, bad), outcome(code.slow, bad))
            self.assertEqual(outcome(code, bad)[0], "miss")


if __name__ == "__main__":
    unittest.main()
