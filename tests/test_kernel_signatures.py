"""The compiled kernels are compiled once per argument type: no compiled call passes numba a literal integer.
Each test fails on any literal signature of any loaded sdc_tasks module, whichever test of the process compiled
it.

A literal argument (``f(x, 0)``, or a variable that starts as ``0`` and grows in a loop) makes numba compile the
callee once more for the literal, and what the callee calls with it: on an empty cache MD's first call took
22-23 s with those compilations and 17-20 s without (sdc_tasks/kdtree.py's note). Python callers never cause it
(numba types a Python int as int64), so any literal signature found here comes from compiled code.
"""

from __future__ import annotations

import sys

import numba
import numpy as np
from numba.core import types

from sdc_tasks.masking.md import md_groups
from sdc_tasks.masking.mdav import TREE_MAX_ATTRIBUTES, mdav_groups
from sdc_tasks.masking.rankswap import PARTNERS, rank_swap_permutation
from sdc_tasks.masking.vmdav import vmdav_groups


def literal_signatures() -> dict[str, list[str]]:
    """Every compiled function of the loaded sdc_tasks modules with a signature holding a literal type."""
    found = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("sdc_tasks"):
            continue
        for attr, obj in vars(module).items():
            if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.__module__ == name:
                literal = [str(s) for s in obj.signatures if any(isinstance(t, types.Literal) for t in s)]
                if literal:
                    found[f"{name}.{attr}"] = literal
    return found


def test_microaggregation_kernels_are_compiled_for_no_literal_integer():
    rng = np.random.default_rng(7)
    few = rng.normal(size=(301, 3))
    many = rng.normal(size=(301, TREE_MAX_ATTRIBUTES + 2))
    for z in (few, many):
        labels = {"md": md_groups(z, 3), "mdav": mdav_groups(z, 3), "vmdav": vmdav_groups(z, 3)}
        for name, lab in labels.items():
            assert np.bincount(lab).min() >= 3, name
    assert literal_signatures() == {}


def test_rank_swapping_is_compiled_for_no_literal_integer():
    uniforms = np.random.default_rng(8).random(2000)
    for partner in PARTNERS:
        perm = rank_swap_permutation(2000, 15, uniforms, partner)
        assert np.array_equal(perm[perm], np.arange(2000)), partner  # an involution
    assert literal_signatures() == {}


def test_distance_linkage_counts_are_compiled_for_no_literal_integer():
    from sdc_tasks.kdtree import kd_tree
    from sdc_tasks.metrics.risk import exact_distances, linkage_counts

    rng = np.random.default_rng(9)
    originals = rng.normal(size=(500, 3))
    masked = originals + rng.normal(scale=0.1, size=originals.shape)
    own = exact_distances(masked, originals)
    closer, tied = linkage_counts(kd_tree(originals), masked, own)
    assert (tied[closer < 2] >= 1).all()  # the own original ties with itself wherever the count is exact
    assert literal_signatures() == {}
