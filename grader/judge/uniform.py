"""Is a freshly initialised table a draw from the uniform distribution on [-limit, +limit]?

The reference's own random draw is only a shape here: the student's values are tested against
the distribution itself, with three tests that a correct draw passes except with negligible
probability, and that deterministic or wrongly scaled tables fail:

- bound: no value beyond ``limit`` (float32 rounding allowed);
- spread: the largest magnitude reaches 90 % of the limit and the standard deviation
  0.45 * limit (uniform: 0.577 * limit);
- shape: the Kolmogorov-Smirnov distance between the values' empirical CDF and the uniform CDF
  is at most ``ks_threshold(n)``. A table of ±limit in a checkerboard has the right bound and
  spread, but a distance of 0.25.

False failures. The tests assume the n values are independent draws (what both TinyTorch
generations do). With n >= 4,000 values (every probe asks for more):
- P(max |w| < 0.9 limit) = 0.9^n < 1e-180;
- P(std < 0.45 limit): w^2 lies in [0, l^2] with mean l^2/3, so by Hoeffding the mean of the
  squares falls below 0.2025 l^2 (= 0.45^2) with probability <= exp(-2 n (1/3 - 0.2025)^2)
  = exp(-137) at n = 4,000 (centring the values moves this by far less than the margin);
- the DKW inequality (Massart's constant, valid for every n) gives
  P(KS distance > eps) <= 2 exp(-2 n eps^2); ``ks_threshold`` picks eps so that this is
  ``FALSE_FAILURE`` = 1e-9 (eps = 3.27 / sqrt(n), 0.052 at n = 4,000).
So a correct draw fails with probability below 1.1e-9 per check, seeded or not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FALSE_FAILURE = 1e-9
MIN_VALUES = 4_000
FLOAT32_SLACK = 1e-5  # the limit itself, rounded to float32, may sit a few ulps outside


def ks_threshold(n: int, alpha: float = FALSE_FAILURE) -> float:
    """The KS distance a correct draw of n values exceeds with probability at most ``alpha`` (DKW)."""
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def ks_distance(values: np.ndarray, limit: float) -> float:
    """sup |F_n(x) - F(x)| for F the CDF of U(-limit, limit)."""
    x = np.sort(values.reshape(-1))
    n = x.size
    cdf = np.clip((x + limit) / (2.0 * limit), 0.0, 1.0)
    above = np.arange(1, n + 1) / n - cdf
    below = cdf - np.arange(0, n) / n
    return float(max(above.max(), below.max()))


@dataclass(frozen=True)
class Draw:
    """What the three tests saw; ``problem`` is None when the values pass all of them."""

    top: float
    spread: float
    distance: float
    threshold: float
    problem: str | None


def judge_draw(values: np.ndarray, limit: float, formula: str) -> Draw:
    """Test ``values`` against U(-limit, limit); ``formula`` names the limit for the student."""
    n = values.size
    top, spread = float(np.abs(values).max()), float(values.std())
    threshold = ks_threshold(max(n, 1))
    distance = ks_distance(values, limit)
    problem = None
    if top > limit * (1 + FLOAT32_SLACK):
        problem = f"values reach {top:.4g}, outside the bound ±{limit:.4g} = ±{formula}"
    elif spread < 1e-12:
        problem = f"every value is {float(values.flat[0]):.4g}: draw them at random"
    elif top < 0.9 * limit:
        problem = f"values only reach ±{top:.4g} (std {spread:.4g}), far inside the bound ±{limit:.4g} = ±{formula}"
    elif spread < 0.45 * limit:
        problem = (f"values cluster near 0: std {spread:.4g}, where a uniform draw on ±{limit:.4g} = ±{formula} "
                   f"has {limit / math.sqrt(3):.4g}")
    elif distance > threshold:
        problem = (f"the values do not look uniform on [-{limit:.4g}, {limit:.4g}]: their distribution differs "
                   f"from the uniform one by {distance:.3f} (Kolmogorov-Smirnov distance; a random uniform "
                   f"draw of {n} values stays below {threshold:.3f})")
    return Draw(top, spread, distance, threshold, problem)


def likely_cause(values: np.ndarray, limit: float, others: dict[str, float]) -> str | None:
    """A cause tested on the values: a uniform draw with a wrong limit (one of ``others``), a
    one-sided or normal draw, or a table of a few repeated values."""
    for formula, other in others.items():
        if abs(other - limit) > 0.02 * limit and judge_draw(values, other, formula).problem is None:
            return f"the values are a uniform draw from ±{formula} = ±{other:.4g}, not ±{limit:.4g}"
    distinct = np.unique(values).size
    if distinct == 1:
        value = float(values.reshape(-1)[0])
        if value == 0:
            return (f"every value is 0: the table was never drawn (np.zeros) or drawn with a limit of 0 (integer "
                    f"division such as 6 // (V + D) gives 0: divide with /); draw it uniformly from "
                    f"[-{limit:.4g}, +{limit:.4g}]")
        made = "np.ones" if value == 1 else "np.full"
        return (f"every value is {value:.4g}: the table is a constant ({made}), never drawn at random; draw it "
                f"uniformly from [-{limit:.4g}, +{limit:.4g}] (np.random.uniform(-limit, limit, shape))")
    measured = float(np.abs(values).max())
    if distinct > 16 and values.min() < 0 < measured and abs(measured - limit) > 0.02 * limit and judge_draw(
            values, measured, f"{measured:.4g}").problem is None:
        ratio = measured / limit
        if abs(ratio - 0.5) < 0.02:
            return (f"the values are a uniform draw from ±{measured:.4g}, half the limit ±{limit:.4g}: (rand - 0.5) * "
                    "limit spans only ±limit/2; draw with np.random.uniform(-limit, limit, shape)")
        return (f"the values are a uniform draw from ±{measured:.4g}, {ratio:.3g} times the limit ±{limit:.4g}: the "
                "limit's formula is off (check it and its parentheses)")
    if values.min() >= 0 and values.max() > 0 and distinct > 16:
        return "every value is >= 0: draw from [-limit, +limit] (np.random.uniform(-limit, limit, shape)), not [0, limit]"
    if distinct <= 16:
        return f"the table holds only {distinct} distinct values: it must be drawn at random, not filled with a pattern"
    centred = values - values.mean()
    kurtosis = float(np.mean(centred**4) / max(np.mean(centred**2) ** 2, 1e-300)) - 3.0
    if abs(kurtosis) < 0.3:  # uniform: -1.2; normal: 0
        return "the values look normally distributed (np.random.randn / normal): use a uniform draw"
    return None
