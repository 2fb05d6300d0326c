"""Shortest decimal text for float16/float32 values, vectorized.

JSON encoders print Python floats (doubles), so ``float32(0.1)`` would come out as
``0.10000000149011612``. For each element this finds the fewest significant digits that still
round-trip to the same float32/float16 value (a binary search: if p digits round-trip, so do p+1),
and returns the double nearest to that short decimal, which any shortest-repr encoder prints as
the short text. ``numpy.ndarray.astype(str)`` gives the same text but is several times slower.
"""

from __future__ import annotations

import numpy as np

# Powers of ten that are exact doubles, so rounding at 10**s and dividing by it is correctly rounded.
_MAX_EXACT_POWER = 22
_POWERS = 10.0 ** np.arange(-_MAX_EXACT_POWER, _MAX_EXACT_POWER + 1)
_MAX_DIGITS = {np.dtype(np.float16): 5, np.dtype(np.float32): 9}


def shortest_doubles(values: np.ndarray) -> np.ndarray:
    """Doubles that print as the shortest text of each float16/float32 element (finite values only)."""
    flat = values.ravel()
    target = flat.dtype.newbyteorder("=")
    as_double = flat.astype(np.float64)
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log10(np.abs(as_double)))
    exponent[~np.isfinite(exponent)] = 0
    exponent = exponent.astype(np.int64)
    max_digits = _MAX_DIGITS[target]

    def candidates(digits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The nearest decimals with `digits` significant digits: ties to even first, then away from zero."""
        shift = np.clip(digits - 1 - exponent, -_MAX_EXACT_POWER, _MAX_EXACT_POWER)
        scaled = as_double * _POWERS[shift + _MAX_EXACT_POWER]
        # Rebuild with an exact power of ten so each double is the one nearest its short decimal.
        power = _POWERS[np.abs(shift) + _MAX_EXACT_POWER]
        up = shift >= 0
        rebuilt = []
        for mantissa in (np.round(scaled), np.trunc(scaled + np.copysign(0.5, scaled))):
            rebuilt.append(np.where(up, mantissa / power, mantissa * power))
        return rebuilt[0], rebuilt[1]

    def round_trips(candidate: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.asarray(candidate.astype(target) == flat)

    low = np.ones(flat.shape, np.int64)
    high = np.full(flat.shape, max_digits, np.int64)
    while True:
        searching = low < high
        if not searching.any():
            break
        middle = (low + high) // 2
        even, away = candidates(middle)
        fits = round_trips(even) | round_trips(away)
        high = np.where(searching & fits, middle, high)
        low = np.where(searching & ~fits, middle + 1, low)
    even, away = candidates(low)
    result = np.where(round_trips(even), even, away)
    # Where 10**s was not exact (|x| < 1e-14 or >= 1e22) fall back to numpy's own shortest repr.
    inexact = (exponent < max_digits - 1 - _MAX_EXACT_POWER) | (exponent > _MAX_EXACT_POWER)
    if inexact.any():
        result[inexact] = flat[inexact].astype(str).astype(np.float64)
    return result
