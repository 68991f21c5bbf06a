"""Pass rates and their noise, with the standard library only.

- The spread of a task's pass rate over N trials is the Wilson score interval at 95 %
  (``wilson``): unlike the normal approximation it stays inside [0, 1] and is not zero at 0/N or N/N.
- Whether two runs' pass rates differ by more than the trials' noise is Fisher's exact test, two-sided
  (``fisher_exact``): the probability, under equal pass rates and the observed totals, of a 2×2 table
  at most as likely as the one observed (hypergeometric probabilities, summed). It is exact for the
  small trial counts evals use, where a z-test's normal approximation is not.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # the two-sided 95 % quantile of the normal distribution
ALPHA = 0.05


def wilson(passed: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``passed`` of ``trials`` ((0, 1) when there are none)."""
    if trials <= 0:
        return (0.0, 1.0)
    p = passed / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def fisher_exact(a_pass: int, a_trials: int, b_pass: int, b_trials: int) -> float:
    """Two-sided p-value of Fisher's exact test on passes and fails of two runs."""
    a_fail, b_fail = a_trials - a_pass, b_trials - b_pass
    if min(a_pass, a_fail, b_pass, b_fail) < 0:
        raise ValueError("passes must be between 0 and the number of trials")
    passes, total = a_pass + b_pass, a_trials + b_trials
    if total == 0:
        return 1.0

    def probability(k: int) -> float:  # k passes in run A, the margins fixed
        return math.comb(a_trials, k) * math.comb(b_trials, passes - k) / math.comb(total, passes)

    observed = probability(a_pass)
    low, high = max(0, passes - b_trials), min(a_trials, passes)
    tail = sum(p for k in range(low, high + 1) if (p := probability(k)) <= observed * (1 + 1e-9))
    return min(1.0, tail)
