"""MD microaggregation kernel: a hand-checked case, a brute-force reference of the algorithm as stated
(sdc_tasks.masking.md.md_groups), the same groups as the scan kernel it replaced (tests/md_scan_reference.py) on
random blocks, on the Census file and, by hash, on 12,000-record blocks, group sizes, means and errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from md_scan_reference import labels_digest, large_blocks, scan_md_labels

from sdc_tasks.datasets import load_census
from sdc_tasks.masking.md import md_groups, md_microaggregate_block
from sdc_tasks.masking.mdav import mdav_groups
from sdc_tasks.masking.microaggregation import attribute_groups

# SHA-256 of the scan kernel's labels (before the tree, commit 50c25d9) on tests/md_scan_reference.large_blocks,
# printed by running that file; commit 50c25d9's own sdc_tasks/masking/md.py gave the same digests
SCAN_KERNEL_DIGESTS = {
    "census-like 3": "42cc22683a998a6662bce298b6d7d7844bc614df11e5b60b273080347384dcc7",
    "census-like 4": "281de69cf4d79ffd8e55d27bba54f9d102225ec541354d35ec4f9cb998bc167f",
    "census-like 13": "dba793bd3051c51f7d411e32d29dc7436e53f3d33e3d7ef772a8a95aab7ab5f1",
    "integers 3": "9ccf52a038fd8af3a7b206689110782a9300aedf2799b51585f35faa77e1507d",
}


def reference_md(z: np.ndarray, k: int) -> np.ndarray:
    """The MD steps with every distance recomputed: the most distant remaining pair is the first maximum of the
    full distance matrix in (row, row) order; groups take their seed and its k-1 closest (ties: lowest row)."""
    rem = list(range(len(z)))
    labels = np.full(len(z), -1)
    g = 0

    def group_around(seed: int) -> None:
        nonlocal g
        others = [i for i in rem if i != seed]
        d = ((z[others] - z[seed]) ** 2).sum(axis=1)
        members = [seed] + [others[j] for j in np.lexsort((others, d))[: k - 1]]
        labels[members] = g
        g += 1
        for i in members:
            rem.remove(i)

    def diameter_end() -> int:
        zz = z[rem]
        d = ((zz[:, None, :] - zz[None, :, :]) ** 2).sum(axis=2)
        return rem[int(np.unravel_index(np.argmax(d), d.shape)[0])]

    while len(rem) >= 3 * k:
        r = diameter_end()
        x_r = z[r].copy()
        group_around(r)
        group_around(rem[int(np.argmax(((z[rem] - x_r) ** 2).sum(axis=1)))])
    if len(rem) >= 2 * k:
        group_around(diameter_end())
    labels[rem] = g
    return labels


def test_hand_checked_case_where_md_and_mdav_differ():
    # the most distant pair is P3 = (1, 4), P4 = (9, 1): 64 + 9 = 73 (next: P2-P4, 68)
    z = np.array([[8, 3], [4, 7], [1, 3], [1, 4], [9, 1], [3, 4]], dtype=float)
    # MD: x_r = P3 with its closest P2 (distance 1); x_s = P4 (73 from P3) with its closest P0 (5); rest P1, P5
    assert md_groups(z, 2).tolist() == [1, 2, 0, 0, 1, 2]
    # MDAV seeds with the record farthest from the average (4.33, 3.67): P4 (28.9), closest P0
    assert mdav_groups(z, 2).tolist() == [0, 2, 1, 1, 0, 2]


def test_lower_indexed_end_of_the_most_distant_pair_on_one_attribute():
    # one attribute: the scan kernel's first bounds, tight there, rounded below the diameter for the lower end and
    # it took the other end first (tests/md_scan_reference.py); the tree kernel follows the tie rule
    z = np.random.default_rng(18923).standard_normal((136, 1))
    lo, hi = int(np.argmin(z)), int(np.argmax(z))
    labels = md_groups(z, 2)
    assert labels[min(lo, hi)] == 0 and labels[max(lo, hi)] == 1
    np.testing.assert_array_equal(labels, reference_md(z, 2))


@pytest.mark.parametrize(
    "n,p,k,integer",
    [(60, 2, 3, True), (97, 3, 4, True), (120, 5, 3, False), (53, 13, 5, False), (40, 1, 3, True), (31, 4, 10, False)],
)
def test_equals_the_brute_force_reference(n, p, k, integer):
    rng = np.random.default_rng(n * p + k)
    z = rng.integers(0, 4, size=(n, p)).astype(float) if integer else rng.standard_normal((n, p))
    np.testing.assert_array_equal(md_groups(z, k), reference_md(z, k))


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 600),
    p=st.sampled_from([1, 2, 3, 4, 5, 13]),
    k=st.integers(2, 10),
    data=st.sampled_from(["normal", "integers", "duplicated rows"]),
)
def test_same_groups_as_the_scan_kernel_on_random_blocks(seed, n, p, k, data):
    rng = np.random.default_rng(seed)
    if data == "integers":  # ties of distances everywhere
        z = rng.integers(0, 4, size=(n, p)).astype(float)
    else:
        z = rng.standard_normal((n, p))
        if data == "duplicated rows":
            z = z[rng.integers(0, max(n // 3, 1), size=n)]
    if n < k:
        return
    np.testing.assert_array_equal(md_groups(z, k), scan_md_labels(z, k))


@pytest.mark.parametrize("n,p,k", [(2000, 3, 3), (3000, 4, 2), (1500, 13, 7)])
def test_same_groups_as_the_scan_kernel_on_larger_blocks(n, p, k):
    rng = np.random.default_rng(n + p + k)
    z = rng.lognormal(0, 1, size=(n, p)) * rng.integers(1, 4, size=(n, 1))  # skewed, correlated attributes
    np.testing.assert_array_equal(md_groups(z, k), scan_md_labels(z, k))


@pytest.mark.parametrize("group_size", [2, 3, 4, None])
def test_same_groups_as_the_scan_kernel_on_census(group_size):
    x = load_census().to_numpy(dtype=float)
    z = (x - x.mean(axis=0)) / x.std(axis=0, ddof=1)
    for cols in attribute_groups(x.shape[1], group_size):
        block = np.ascontiguousarray(z[:, cols])
        for k in range(2, 11):
            np.testing.assert_array_equal(md_groups(block, k), scan_md_labels(block, k), err_msg=f"{cols} k={k}")


@pytest.fixture(scope="module")
def blocks_12000():
    """The 12,000-record blocks whose scan-kernel labels are known by digest."""
    return large_blocks()


@pytest.mark.parametrize("name", sorted(SCAN_KERNEL_DIGESTS))
def test_same_groups_as_the_scan_kernel_on_12000_record_blocks(name, blocks_12000):
    block, k = blocks_12000[name]
    assert labels_digest(md_groups(block, k)) == SCAN_KERNEL_DIGESTS[name]


@pytest.mark.parametrize("n,k", [(1, 1), (7, 3), (9, 3), (10, 3), (1000, 7), (20, 10)])
def test_group_sizes(n, k):
    z = np.random.default_rng(n).standard_normal((n, 3))
    sizes = np.bincount(md_groups(z, k))
    assert sizes.sum() == n
    assert (sizes[:-1] == k).all()
    assert k <= sizes[-1] <= 2 * k - 1 or (n < 2 * k and sizes[-1] == n)


def test_block_keeps_means_and_groups_attributes():
    rng = np.random.default_rng(5)
    x = rng.lognormal(8, 1, size=(300, 5))
    out = md_microaggregate_block(x, 4, x.mean(axis=0), x.std(axis=0), group_size=2)
    np.testing.assert_allclose(out.mean(axis=0), x.mean(axis=0), rtol=1e-12)
    for cols in ([0, 1], [2, 3, 4]):  # 2 + 3: the last group takes the left-over attribute
        rows = {tuple(r) for r in np.round(out[:, cols], 9)}
        assert len(rows) == 300 // 4
    assert out.shape == x.shape


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="k=5 exceeds the number of records n=3"):
        md_groups(np.zeros((3, 2)), 5)
    with pytest.raises(ValueError, match="non-finite value in row 2"):
        md_groups(np.array([[0.0], [1.0], [np.nan], [2.0]]), 2)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        md_groups(np.zeros((4, 2)), 0)
    assert md_groups(np.zeros((0, 2)), 3).shape == (0,)
