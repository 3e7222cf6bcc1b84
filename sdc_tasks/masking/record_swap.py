"""Targeted record swapping (TRS) planned on the household table: which households swap their geography with
which donor households.

Source: sdcMicro's ``recordSwap`` (R/recordSwap.R, src/recordSwap/recordSwap.cpp and the vignette
"Targeted Record Swapping"; docs/references.md, sdcMicro recordSwap). The procedure, per household table (one
row per household, in household-id order):

1. risk: a person's risk at level h is 1 / (the persons sharing its risk variables and its geography down to
   level h); a household's risk at h is the largest of its members' (vignette, "Sampling probability");
2. a household is risky at the coarsest level h where its risk exceeds 1/k (some member in a cell of fewer than
   k persons), and must then be swapped across that level (recordSwap.cpp ``setLevels``);
3. swaprate x households / 2 swaps, ceiled or floored with probability 1/2, are shared among the lowest-level
   areas in proportion to their households, the remainder one each to areas drawn at random
   (``distributeDraws``);
4. level by level, coarse to fine, each group of that level (its geography down to h) swaps its households risky
   at h; at the lowest level each area also draws, weighted by risk, as many more households as its share less
   the households it already swapped (``randSample``, Efraimidis-Spirakis keys risk / Exp(1));
5. the donor of a household is, in the order of its level's donor keys (risk / Exp(1), descending, drawn once),
   the first household outside the swapping group, not swapped nor a donor yet, that matches it on the first
   similarity profile, else the second, ... (``sampleDonor``); none: the household is counted as unmatched;
6. a pair exchanges its whole geography and carry-along variables, every member of both households.

Choices sdcMicro leaves open, and where this code takes them: docs/recordswap.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from sdc_tasks.randomness import rng_for

NO_DONOR = -1


@dataclass(frozen=True)
class SwapPlan:
    """The swaps of a household table: ``partner[i]`` the household household i takes its geography from (itself
    when it keeps its own), and per level ``risky`` (households risky at that level), ``swapped`` (households in
    pairs formed at that level, both sides) and ``unmatched`` (risky households of that level that found no
    donor)."""

    partner: np.ndarray
    risky: np.ndarray
    swapped: np.ndarray
    unmatched: np.ndarray


def risk_levels(risk: np.ndarray, k: int) -> np.ndarray:
    """The coarsest level at which each household's risk exceeds 1/k, the number of levels for a household at risk
    at none (recordSwap.cpp ``setLevels`` with risk_threshold 1/k)."""
    above = risk > 1.0 / k
    return np.where(above.any(axis=1), above.argmax(axis=1), risk.shape[1])


def area_quotas(area: np.ndarray, areas: int, swap_rate: float, rng: np.random.Generator) -> np.ndarray:
    """Swaps per lowest-level area: swap_rate x households / 2, ceiled or floored with probability 1/2, shared in
    proportion to the areas' households, the rounded sum of the fractional parts one each to areas drawn at random
    (recordSwap.cpp ``distributeDraws``)."""
    households = len(area)
    half = households * swap_rate / 2
    total = int(np.ceil(half)) if rng.integers(0, 2) == 0 else int(np.floor(half))
    exact = np.bincount(area, minlength=areas) / households * total
    quotas = np.floor(exact).astype(np.int64)
    extra = round(float((exact - quotas).sum()))
    quotas[np.sort(rng.permutation(areas)[:extra])] += 1
    return quotas


def descending_keys(weight: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Efraimidis-Spirakis keys weight / Exp(1): the households in descending key order are a weighted sample
    without replacement (recordSwap.cpp ``randSample``, after R package wrswoR)."""
    return weight / rng.exponential(1.0, len(weight))


@numba.njit(cache=True, nogil=True)
def _donor(i, group, used, pool, group_of, starts, heads, profile_of, profiles):
    """The first household of household i's donor pool, profile by profile, that is unused and outside its group
    (``pool``: households in donor-key order per profile bucket, ``starts`` each bucket's first place, ``heads``
    each bucket's first place not known to be used); NO_DONOR when none."""
    for p in range(profiles):
        b = profile_of[p, i]
        j = heads[p, b]
        end = starts[p, b + 1]
        while j < end and used[pool[p, j]]:
            j += 1
        heads[p, b] = j
        while j < end:
            d = pool[p, j]
            if not used[d] and group_of[d] != group:
                return d
            j += 1
    return -1


@numba.njit(cache=True, nogil=True)
def _swap_level(ranked, group_starts, must, rest, group_of, used, failed, initiated, partner, pool, starts, heads,
                profile_of, profiles):
    """One level's swaps, group by group (``ranked``: households by group, each group's in draw-key order from
    ``group_starts``): a group's free households that must swap at this level, then as many of its other free
    households as ``rest`` exceeds the must-swap ones (0 above the lowest level; recordSwap.cpp ``randSample``
    draws N - z more, z the must-swap households), each paired with a donor as it comes (``_donor``); a pair
    exchanges partners, both become used and the swapper is marked ``initiated`` (recordSwap.cpp's swappedIndex);
    a swapper without a donor is marked ``failed`` (never swapped later; it may still serve as a donor, as in
    sdcMicro). Households are taken when their group comes, so one taken as a donor meanwhile is not drawn.
    Returns how many failed."""
    missing = 0
    for g in range(len(group_starts) - 1):
        lo, hi = group_starts[g], group_starts[g + 1]
        draws = rest[g]
        for kind in range(2):
            for j in range(lo, hi):
                i = ranked[j]
                if used[i] or failed[i] or must[i] != (kind == 0):
                    continue
                if draws <= 0 and kind == 1:
                    break
                draws -= 1
                d = _donor(i, group_of[i], used, pool, group_of, starts, heads, profile_of, profiles)
                if d < 0:
                    failed[i] = True
                    missing += 1
                    continue
                used[i] = True
                used[d] = True
                initiated[i] = True
                partner[i] = d
                partner[d] = i
    return missing


def _profile_pools(profile_codes: list[np.ndarray], order: np.ndarray):
    """Per similarity profile, the households grouped by profile value, each group in ``order`` (donor-key order):
    (pool, starts, profile_of) as ``_donor`` reads them, padded to the largest number of profile values."""
    n, profiles = len(order), len(profile_codes)
    widths = [int(codes.max(initial=-1)) + 1 for codes in profile_codes]
    pool = np.empty((profiles, n), np.int64)
    starts = np.zeros((profiles, max(widths, default=0) + 1), np.int64)
    for p, codes in enumerate(profile_codes):
        ranked = codes[order]
        pool[p] = order[np.argsort(ranked, kind="stable")]
        starts[p, 1:widths[p] + 1] = np.cumsum(np.bincount(codes, minlength=widths[p]))
        starts[p, widths[p] + 1:] = n
    return pool, starts, np.stack(profile_codes) if profile_codes else np.zeros((0, n), np.int64)


def plan_swaps(geography: np.ndarray, risk: np.ndarray, profile_codes: list[np.ndarray], k: int, swap_rate: float,
               seed: int, step: int) -> SwapPlan:
    """The swap plan of a household table (module docstring, steps 2-6): ``geography`` (households, levels) the
    integer codes of each level (nested: a code of level h lies in one code of level h - 1), ``risk`` (households,
    levels) each household's risk per level, ``profile_codes`` one integer code per household per similarity
    profile, random streams keyed by (seed, step, purpose)."""
    n, levels = geography.shape
    rng = rng_for(seed, step, "record_swap")
    level_of = risk_levels(risk, k)
    area = geography[:, -1]
    quotas = area_quotas(area, int(area.max(initial=-1)) + 1, swap_rate, rng)
    donor_keys = [descending_keys(risk[:, h], rng) for h in range(levels)]
    draw_keys = descending_keys(risk[:, -1], rng)
    partner = np.arange(n, dtype=np.int64)
    used, failed, initiated = np.zeros(n, np.bool_), np.zeros(n, np.bool_), np.zeros(n, np.bool_)
    swapped, unmatched = np.zeros(levels, np.int64), np.zeros(levels, np.int64)
    for h in range(levels):
        group = np.ascontiguousarray(geography[:, h])
        groups = int(group.max(initial=-1)) + 1
        ranked = np.lexsort((-draw_keys, group))
        group_starts = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=groups))])
        rest = (np.maximum(quotas - np.bincount(area[initiated], minlength=groups), 0) if h == levels - 1
                else np.zeros(groups, np.int64))
        pool, starts, profile_of = _profile_pools(profile_codes, np.argsort(-donor_keys[h], kind="stable"))
        heads = starts[:, :-1].copy()
        before = int(used.sum())
        unmatched[h] = _swap_level(ranked, group_starts, level_of == h, rest, group, used, failed, initiated,
                                   partner, pool, starts, heads, profile_of, len(profile_codes))
        swapped[h] = int(used.sum()) - before
    risky = np.bincount(level_of, minlength=levels + 1)[:levels]
    return SwapPlan(partner, risky, swapped, unmatched)
