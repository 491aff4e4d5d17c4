"""The step natively, through its JSON interface: `weft guest test`."""

import unittest

from weft_guest import StepError

from stats import stats


class TestStats(unittest.TestCase):
    def test_summarises(self):
        out = stats.call_json({"numbers": [2, 4, 4, 4, 5, 5, 7, 9]})
        self.assertEqual(
            out,
            {
                "count": 8, "sum": 40, "mean": 5, "median": 4.5, "min": 2, "max": 9,
                "stdev": 2.13809, "variance": 4.571429, "quartiles": [4, 4.5, 6.5], "mode": 4,
            },
        )

    def test_one_number_has_no_spread(self):
        out = stats.call_json({"numbers": [3]})
        self.assertEqual((out["mean"], out["stdev"], out["quartiles"]), (3, None, None))

    def test_a_wrong_input_names_the_field(self):
        for value, message in [
            ({"numbers": []}, "input.numbers: must have at least 1 item"),
            ({"numbers": [1, "two"]}, "input.numbers[1]: expected number, got string"),
            ({"numbers": [1], "precision": 16}, "input.precision: must be at most 15"),
        ]:
            with self.assertRaises(StepError) as e:
                stats.call_json(value)
            self.assertEqual((e.exception.code, e.exception.message), ("invalid_input", message))


if __name__ == "__main__":
    unittest.main()
