"""A weft code step in Python on the weft_guest SDK: summary statistics of a
list of numbers. `weft guest build` makes the component build/stats.wasm;
`weft guest test` runs test_stats.py natively.
"""

import heapq  # noqa: F401  statistics.mode needs it; componentize-py keeps only what is imported
import math
import statistics
from dataclasses import dataclass, field
from typing import Optional

from weft_guest import Context, StepError, log, progress, step


@dataclass
class In:
    numbers: list[float] = field(metadata={"description": "The sample.", "minItems": 1})
    precision: int = field(
        default=6, metadata={"description": "Decimal places the results are rounded to.", "minimum": 0, "maximum": 15}
    )


@dataclass
class Out:
    count: int
    sum: float
    mean: float
    median: float
    min: float
    max: float
    stdev: Optional[float] = field(metadata={"description": "Sample standard deviation; null for one number."})
    variance: Optional[float] = field(metadata={"description": "Sample variance; null for one number."})
    quartiles: Optional[list[float]] = field(metadata={"description": "The three cut points; null for one number."})
    mode: float


@step(name="stats", description="Summary statistics (mean, median, spread, quartiles) of a list of numbers.")
def stats(input: In, ctx: Context) -> Out:
    numbers, precision = input.numbers, input.precision
    log(f"step {ctx.step} attempt {ctx.attempt}: {len(numbers)} numbers")
    progress(f"summarising {len(numbers)} numbers")

    def r(x):
        if x is None:
            return None
        x = round(x, precision)
        # Whole numbers print as integers: 2 rather than 2.0.
        return int(x) if float(x).is_integer() and abs(x) < 2**53 else x

    many = len(numbers) >= 2
    if not many:
        log("one number: no stdev, variance or quartiles", level="warn")
    try:
        return Out(
            count=len(numbers),
            sum=r(math.fsum(numbers)),
            mean=r(statistics.fmean(numbers)),
            median=r(statistics.median(numbers)),
            min=r(min(numbers)),
            max=r(max(numbers)),
            stdev=r(statistics.stdev(numbers)) if many else None,
            variance=r(statistics.variance(numbers)) if many else None,
            quartiles=[r(q) for q in statistics.quantiles(numbers, n=4)] if many else None,
            mode=r(statistics.mode(numbers)),
        )
    except (OverflowError, statistics.StatisticsError) as e:
        raise StepError("out_of_range", f"cannot summarise these numbers: {e}")
