"""Dask graphs for record linkage at scale: exact blocked distance-based linkage (DLD_i, DLD2_i) and
probabilistic linkage (PLD).

The original records are split into spatial cells on the standardized key variables (a
:class:`~sdc_tasks.metrics.spatial_blocks.SplitTree` grown from a hash sample of the records; about
``cell_rows`` records per cell). Each masked record knows its distance to its own original record, so the only
originals that can decide its linkage credit lie in the ball of that radius around it: the record is sent to
every cell the ball meets, each cell counts the originals strictly nearer and tied, and the counts, which add
over disjoint cells, are summed back per masked record. The result equals a brute-force search over the whole
file while no task holds more than one cell of originals (sdc_methods_comparison_chapter.txt sec. 3,
Distance-Based Record Linkage; docs/metrics.md DLD_i, DLD2_i).

Probabilistic linkage (sec. 3, Probabilistic Record Linkage; Jaro 1989) blocks on cells grown the same way but
smaller (``PLD_CELL_ROWS``, because the exact assignment of a cell costs more than linearly in its size): a masked
record is a candidate for the ``PLD_CANDIDATES`` originals of its cell nearest to it on all key variables.
Agreement patterns are counted per cell and summed, the Fellegi-Sunter model is fitted once by EM on the
summed counts, and each cell is then assigned one-to-one by maximum total weight. Candidate pairs never cross
cells, so the per-cell assignments together are the optimal assignment of the whole candidate graph. The setup
the published Table 1's PLD column is best matched by (``published_probabilistic_linkage_graph``, sec. 4;
docs/reproduction.md) reuses these cells, candidates and the EM fit on the first i keys, with binary agreement
and each masked record taking its maximum-weight candidate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import dask
import numpy as np
import pandas as pd
from dask.delayed import Delayed
from scipy.spatial import cKDTree

from sdc_tasks.metrics import pld
from sdc_tasks.metrics.risk import exact_distances, linkage_counts, linkage_credit, search_radius
from sdc_tasks.metrics.spatial_blocks import Cell, SplitTree, make_cell, sample_mask, split_tree
from sdc_tasks.reserved import MASKED_SUFFIX
from sdc_tasks.task_graph import TaskGraph, TaskRef

DEFAULT_CELL_ROWS = 250_000
ROUTE_ROWS = 1_000_000
MIN_ROUTE_GROUPS = 4
PLD_CELL_ROWS = 20_000
SAMPLE_ROWS_PER_CELL = 4_000
PLD_CANDIDATES = 5
MAX_PATTERNS = 2**22
EM_MAX_ITER = 10_000
EM_TOL = 1e-10
PLDPUB_EM_MAX_ITER = 2_000
PLDPUB_EM_TOL = 1e-6
PLDPUB_THRESHOLD = 0.1
PLDPUB_CANDIDATES = 100


def gathered(parts: list[pd.DataFrame], columns: str | list[str], dtype=None) -> np.ndarray:
    """One column (or several, as an (n, c) array) of consecutive partitions as one array. Partitions are passed
    whole and read in place (a column selection per partition in the graph would be a copy, held until the
    gathering task runs); one task serves several partitions."""
    return np.concatenate([p[columns].to_numpy(dtype) for p in parts])


def _standardized(parts: list[pd.DataFrame], columns: list[str], center: np.ndarray,
                  scale: np.ndarray) -> np.ndarray:
    """The given columns of consecutive partitions as float64 values standardized with the original's mean and
    sd, in place in the gathered array: no second array of that size (on 1e6 x 7 values, in one process,
    (x - c) / s took 0.017-0.14 s, the same operations in place 0.005 s)."""
    values = gathered(parts, columns, np.float64)
    values -= center
    values /= scale
    return values


def chunked(refs: list, n: int) -> list[list]:
    """Consecutive partitions grouped so that one group holds about ROUTE_ROWS of the ``n`` records (assuming
    partitions of similar size), in at least MIN_ROUTE_GROUPS groups where there are that many partitions (so a
    small file still routes in parallel). Every routing step moves one piece from each group to each cell, so the
    number of tasks is (groups x cells) per step: grouping keeps the scheduler's work per task small beside the
    task's own (at 1e7 records in 40 partitions and 40 cells, a prefix of DLD had 8,448 tasks and about 6 s of
    pure scheduling on the driver)."""
    per = max(1, min((ROUTE_ROWS * len(refs)) // max(n, 1), math.ceil(len(refs) / MIN_ROUTE_GROUPS)))
    return [refs[i:i + per] for i in range(0, len(refs), per)]


def _by_cell(cell: np.ndarray, n_cells: int, *arrays: np.ndarray) -> tuple:
    """The rows of each array grouped by cell number: one tuple of row subsets per cell, in row order within a
    cell (one stable sort of the cell numbers, a radix sort where they fit 16 bits; each array then gathered once
    and cut)."""
    order = np.argsort(cell.astype(np.uint16) if n_cells <= 2**16 else cell, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(cell, minlength=n_cells))])
    taken = [a[order] for a in arrays]
    return tuple(tuple(a[lo:hi] for a in taken) for lo, hi in zip(bounds[:-1], bounds[1:]))


def _original_points(parts: list[pd.DataFrame], id_col: str, keys: list[str], center: np.ndarray,
                     scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ids and standardized key values of a group of original partitions."""
    return gathered(parts, id_col), _standardized(parts, keys, center, scale)


def _paired_points(parts: list[pd.DataFrame], id_col: str, keys: list[str], center: np.ndarray,
                   scale: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The ids, standardized original and masked key values of a group of paired partitions and each record's
    distance to its own original: all that the linkage graphs read of them, so the partitions (every paired
    column) are read once, by one task, and released before any cell is built."""
    ids, own = _original_points(parts, id_col, keys, center, scale)
    q = _standardized(parts, [k + MASKED_SUFFIX for k in keys], center, scale)
    return ids, own, q, exact_distances(q, own)


def _sample(ids: np.ndarray, points: np.ndarray, fraction: float) -> np.ndarray:
    """The standardized key values of the original records of a group that fall in the id-hash sample."""
    return points[sample_mask(ids, fraction)]


def _grow(samples: list[np.ndarray], n_cells: int) -> SplitTree:
    """The split tree of the pooled sample."""
    return split_tree(np.concatenate(samples), n_cells)


def _route_originals(ids: np.ndarray, points: np.ndarray, tree: SplitTree, n_cells: int) -> tuple:
    """A group of original records (ids, standardized key values) cut by cell: a (ids, points) piece per cell."""
    return _by_cell(tree.leaves_of(points), n_cells, ids, points)


def _cell(pieces: list[tuple[np.ndarray, np.ndarray]]) -> Cell:
    """A cell from its pieces of every original partition."""
    return make_cell(np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces]))


def _route_home(q: np.ndarray, d_own: np.ndarray, tree: SplitTree, n_cells: int) -> tuple:
    """First pass: every row of a group of paired partitions (its standardized masked key values and distances
    to its own originals, :func:`_paired_points`) to the cell holding its masked record, as (rows, masked key
    values, distance to its own original) per cell."""
    return _by_cell(tree.leaves_of(q), n_cells, np.arange(len(q)), q, d_own)


def _route_rest(q: np.ndarray, d_own: np.ndarray, tree: SplitTree, n_cells: int,
                home: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple:
    """Second pass: the rows still undecided after their home cell (fewer than two originals strictly nearer
    there: with two, the record is neither linked nor linked to 2nd nearest wherever the others lie) to every
    other cell their search ball meets, per cell as in :func:`_route_home`."""
    closer = np.zeros(len(q), dtype=np.int64)
    for rows, c, _ in home:
        closer[rows] = c
    undecided = np.flatnonzero(closer < 2)
    rows, leaf = tree.ball_leaves(q[undecided], search_radius(d_own[undecided]))
    rows = undecided[rows]
    away = leaf != tree.leaves_of(q)[rows]
    rows, leaf = rows[away], leaf[away]
    return _by_cell(leaf, n_cells, rows, q[rows], d_own[rows])


def _cell_counts(cell: Cell, routed: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple:
    """For each group of paired partitions, the (rows, strictly closer, tied) counts of the originals of one cell;
    rows whose ball misses the cell's bounding box are skipped. The groups' rows are searched in one batch: the
    search visits them in the order of the tree's leaves, so one batch reads each part of the tree once where one
    search per group would read all of it once per group (1.1 against 1.6 s a cell of 250,000 records at 1e7
    records in ten groups)."""
    near = [cell.min_distance(q) <= search_radius(d_own) for _, q, d_own in routed]
    closer, tied = linkage_counts(cell.tree, np.concatenate([q[k] for (_, q, _), k in zip(routed, near)]),
                                  np.concatenate([d_own[k] for (_, _, d_own), k in zip(routed, near)]))
    ends = np.cumsum([0, *(np.count_nonzero(k) for k in near)])
    return tuple((rows[k], closer[a:b], tied[a:b])
                 for (rows, _, _), k, a, b in zip(routed, near, ends[:-1], ends[1:]))


def _group_credit(n_rows: int, counts: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                  ties: str = "share") -> np.ndarray:
    """Summed 'linked' and 'linked to 2nd nearest' credits of one group of paired partitions from the counts of
    every cell, shape (2,). ``ties="share"``: the docs/metrics.md rule (1/t among t tied records); ``ties="linked"``: a
    record counts as linked when no record is strictly nearer than its own, as the published Table 1 was computed
    (docs/reproduction.md)."""
    closer = np.zeros(n_rows, dtype=np.int64)
    tied = np.zeros(n_rows, dtype=np.int64)
    for rows, c, t in counts:  # a cell's rows are distinct (a row is routed to a cell at most once)
        closer[rows] += c
        tied[rows] += t
    if ties == "linked":
        return np.array([np.count_nonzero(closer == 0), np.count_nonzero(closer == 1)], dtype=np.float64)
    return np.array([linkage_credit(closer, tied, 1).sum(), linkage_credit(closer, tied, 2).sum()])


def sample_fraction(n: int, n_cells: int) -> float:
    """The share of ``n`` original records in the hash sample a split tree of ``n_cells`` cells is grown from: about
    SAMPLE_ROWS_PER_CELL records a cell, all of them for a small file."""
    return min(1.0, SAMPLE_ROWS_PER_CELL * n_cells / max(n, 1))


def n_cells_for(n: int, cell_rows: int) -> int:
    """Number of cells for ``n`` original records at about ``cell_rows`` records per cell."""
    if cell_rows < 1:
        raise ValueError(f"cell_rows must be a positive integer, not {cell_rows!r}")
    return max(1, math.ceil(n / cell_rows))


def group_points(g: TaskGraph, orig_parts: list, pair_parts: list, n_pairs: int, id_col: str, keys: list[str],
                 center: np.ndarray, scale: np.ndarray,
                 n: int) -> tuple[list[tuple[TaskRef, TaskRef]], list[tuple[TaskRef, TaskRef, TaskRef, TaskRef]]]:
    """Add to ``g`` one task per group of original partitions (``n`` records) and one per group of paired
    partitions (``n_pairs``), the same task when the pairs are the original file's partitions, giving the points
    the linkage graphs read; returns per original group (ids, standardized keys) and per paired group (ids,
    standardized original keys, standardized masked keys, distance to the own original) as references to their
    items."""
    pair_groups = chunked([g.input(p) for p in pair_parts], n_pairs)
    paired = [g.task("points", (i,), _paired_points, group, id_col, keys, center, scale)
              for i, group in enumerate(pair_groups)]
    pairs = [tuple(g.item(p, j) for j in range(4)) for p in paired]
    if [p.key for p in orig_parts] == [p.key for p in pair_parts]:
        return [p[:2] for p in pairs], pairs
    originals = [g.task("originals", (i,), _original_points, group, id_col, keys, center, scale)
                 for i, group in enumerate(chunked([g.input(p) for p in orig_parts], n))]
    return [(g.item(o, 0), g.item(o, 1)) for o in originals], pairs


def split_graph(g: TaskGraph, originals: list[tuple[TaskRef, TaskRef]], n: int,
                cell_rows: int) -> tuple[TaskRef, list[TaskRef], int]:
    """Add to ``g`` the split tree and the cells of the original records (per group, (ids, standardized keys):
    :func:`group_points`); returns (tree, cells, number of cells). With files, the routed originals are removed once
    every cell is built, and the tree returned is given to the tasks reading it only then: the masked records are
    routed to the cells once the routed originals are gone, not beside them (at 4e6 records, 256 of the linkage
    files' 1,516 MB)."""
    n_cells = n_cells_for(n, cell_rows)
    fraction = sample_fraction(n, n_cells)
    tree = g.task("tree", (), _grow, [g.task("sample", (i,), _sample, ids, points, fraction)
                                      for i, (ids, points) in enumerate(originals)], n_cells)
    routed = [g.task("route-originals", (i,), _route_originals, ids, points, tree, n_cells)
              for i, (ids, points) in enumerate(originals)]
    cells = [g.task("cell", (c,), _cell, [g.item(r, c) for r in routed]) for c in range(n_cells)]
    return g.after("tree-once-cells", tree, g.remove("routed-originals-removed", routed, cells)), cells, n_cells


def linkage_graph(orig_parts: list, pair_parts: list, pair_sizes: list[int], id_col: str, keys: list[str],
                  center: np.ndarray, scale: np.ndarray, n: int, cell_rows: int = DEFAULT_CELL_ROWS,
                  ties: str = "share", files: Path | None = None) -> Delayed:
    """Delayed summed (DLD, DLD2) credits, shape (2,), of the paired partitions on the given key variables
    (``ties``: see :func:`_group_credit`). One low-level graph: routing is all-to-all between partitions
    and cells; with ``files``, its tasks' results (cells, routed pieces, counts) are kept in that directory
    (task_graph.TaskGraph), not in the workers' memory."""
    g = TaskGraph("linkage", [p.key for p in (*orig_parts, *pair_parts)], keys, center, scale, cell_rows, ties,
                  files=files)
    originals, pairs = group_points(g, orig_parts, pair_parts, sum(pair_sizes), id_col, keys, center, scale, n)
    tree, cells, n_cells = split_graph(g, originals, n, cell_rows)
    group_sizes = [sum(sizes) for sizes in chunked(list(pair_sizes), sum(pair_sizes))]
    home = [g.task("home", (i,), _route_home, q, d_own, tree, n_cells) for i, (_, _, q, d_own) in enumerate(pairs)]
    home_counts = [g.task("home-counts", (c,), _cell_counts, cells[c], [g.item(h, c) for h in home])
                   for c in range(n_cells)]
    rest = [g.task("rest", (i,), _route_rest, q, d_own, tree, n_cells, [g.item(hc, i) for hc in home_counts])
            for i, (_, _, q, d_own) in enumerate(pairs)]
    rest_counts = [g.task("rest-counts", (c,), _cell_counts, cells[c], [g.item(r, c) for r in rest])
                   for c in range(n_cells)]
    credits = [g.task("credit", (i,), _group_credit, size,
                      [g.item(cnt, i) for cnt in (*home_counts, *rest_counts)], ties)
               for i, size in enumerate(group_sizes)]
    removed_when_read(g, originals, pairs, cells, home, home_counts, rest, rest_counts)
    return g.result(g.reduce("credits", credits, np.add))


def removed_when_read(g: TaskGraph, originals: list, pairs: list, cells: list[TaskRef], home: list[TaskRef],
                      home_counts: list[TaskRef], rest: list[TaskRef], rest_counts: list[TaskRef]) -> None:
    """With files, distance linkage's results removed once every task reading them has run (:meth:`TaskGraph.remove`;
    the routed originals by :func:`split_graph`): the first pass's routed records once their home cells have
    counted them, the groups' points once the second pass has routed them, the cells and the second pass's routed
    records once the second pass has counted. At 4e6 records the graph's files held 1,516 MB at once, all it had
    written: 512 MB of points, 372 of cells, 288 of the first pass's routed records, 256 of routed originals."""
    g.remove("home-removed", home, home_counts)
    g.remove("points-removed", [ids for ids, *_ in (*pairs, *originals)], rest)
    g.remove("cells-removed", [*cells, *rest], rest_counts)


def _masked_as_originals(part: pd.DataFrame, id_col: str, keys: list[str]) -> pd.DataFrame:
    """The masked records of a paired partition as the searched file: id and masked key values under the key
    names."""
    return pd.DataFrame({id_col: part[id_col].to_numpy(),
                         **{k: part[k + MASKED_SUFFIX].to_numpy(np.float64) for k in keys}})


def _swapped(part: pd.DataFrame, id_col: str, keys: list[str]) -> pd.DataFrame:
    """A paired partition with the roles of the files exchanged: each original record becomes the query and its
    masked record the own record to find."""
    out = {id_col: part[id_col].to_numpy(), **{k: part[k + MASKED_SUFFIX].to_numpy(np.float64) for k in keys}}
    out.update({k + MASKED_SUFFIX: part[k].to_numpy(np.float64) for k in keys})
    return pd.DataFrame(out)


def published_linkage_graph(pair_parts: list, pair_sizes: list[int], id_col: str, keys: list[str],
                            cell_rows: int = DEFAULT_CELL_ROWS, files: Path | None = None):
    """Delayed (linked, linked to 2nd nearest) counts, shape (2,), of distance-based linkage as the published
    Table 1 of sdc_methods_comparison_chapter.txt (sec. 4) was computed (found by calibration on the Census file,
    docs/reproduction.md): raw Euclidean distances on the given keys (no standardization), from each original
    record to the masked file, linked when no masked record is strictly nearer than its own masked record
    (ties count as linked). The same blocked exact search, with the masked records as the searched file (``files``:
    see :func:`linkage_graph`)."""
    searched = [dask.delayed(_masked_as_originals)(p, id_col, keys) for p in pair_parts]
    queries = [dask.delayed(_swapped)(p, id_col, keys) for p in pair_parts]
    zero, one = np.zeros(len(keys)), np.ones(len(keys))
    return linkage_graph(searched, queries, pair_sizes, id_col, keys, zero, one, sum(pair_sizes), cell_rows,
                         ties="linked", files=files)


@dataclass(frozen=True)
class Candidates:
    """The candidate pairs of one cell: masked record ``rows[e]`` (of ``masked_ids``) with original ``cols[e]``
    (of ``orig_ids``), and the agreement pattern code of each pair."""

    masked_ids: np.ndarray
    orig_ids: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    codes: np.ndarray


def _route_points(ids: np.ndarray, q: np.ndarray, tree: SplitTree, n_cells: int) -> tuple:
    """A group of paired records (ids, standardized masked keys) cut by the cell holding each masked record: (ids,
    standardized masked keys) per cell."""
    return _by_cell(tree.leaves_of(q), n_cells, ids, q)


def _candidates(cell: Cell, pieces: list[tuple[np.ndarray, np.ndarray]], thresholds: tuple[float, ...],
                per_record: int) -> Candidates:
    """Candidate pairs of one cell: each masked record with its ``per_record`` nearest originals of the cell, and
    the agreement pattern of each pair from the standardized differences (docs/metrics.md PLD)."""
    ids = np.concatenate([p[0] for p in pieces])
    q = np.concatenate([p[1] for p in pieces])
    order = np.argsort(ids, kind="stable")
    ids, q = ids[order], q[order]
    if cell.tree is None or len(ids) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Candidates(ids, cell.ids, empty, empty, empty)
    kk = min(per_record, cell.tree.n)
    points = cell.points
    _, idx = cKDTree(points).query(q, k=kk)
    cols = np.asarray(idx, dtype=np.int64).reshape(len(q), kk).ravel()
    rows = np.repeat(np.arange(len(q)), kk)
    levels = pld.agreement_levels(np.abs(q[rows] - points[cols]), thresholds)
    return Candidates(ids, cell.ids, rows, cols, pld.pattern_codes(levels, len(thresholds) + 1))


def _cell_patterns(cand: Candidates, n_patterns: int) -> np.ndarray:
    """Pattern frequencies of one cell's candidate pairs."""
    return pld.pattern_counts(cand.codes, n_patterns)


def _cell_links(cand: Candidates, model: pld.FellegiSunterModel) -> np.ndarray:
    """(correctly paired records, records whose own original is a candidate) of one cell after the one-to-one
    maximum-weight assignment (Jaro 1989)."""
    rows, cols = pld.assign_max_weight(cand.rows, cand.cols, model.weights()[cand.codes], len(cand.masked_ids),
                                   len(cand.orig_ids))
    reachable = np.unique(cand.rows[cand.masked_ids[cand.rows] == cand.orig_ids[cand.cols]]).size
    return np.array([pld.correct_pairs(rows, cols, cand.masked_ids, cand.orig_ids), reachable])


def _fit(counts: np.ndarray, m_vars: int, n_levels: int, max_iter: int = EM_MAX_ITER,
         tol: float = EM_TOL) -> pld.FellegiSunterModel:
    """The Fellegi-Sunter model fitted by EM on the summed pattern frequencies (up to ``max_iter`` iterations,
    cheap: an iteration costs O(patterns); stops when no parameter moves more than ``tol``)."""
    return pld.fit_fellegi_sunter(counts, m_vars, n_levels, max_iter=max_iter, tol=tol)


def n_patterns_for(m_vars: int, thresholds: tuple[float, ...]) -> int:
    """Number of agreement patterns of ``m_vars`` key variables; refuses more than MAX_PATTERNS."""
    count = (len(thresholds) + 1) ** m_vars
    if count > MAX_PATTERNS:
        raise ValueError(f"{m_vars} key variables with {len(thresholds) + 1} agreement levels make {count} "
                         f"agreement patterns (more than {MAX_PATTERNS}): use fewer key variables or thresholds")
    return count


def _candidate_graph(g: TaskGraph, orig_parts: list, pair_parts: list, id_col: str, keys: list[str],
                     center: np.ndarray, scale: np.ndarray, n: int, cell_rows: int, thresholds: tuple[float, ...],
                     per_record: int, em: tuple[int, float] = (EM_MAX_ITER, EM_TOL)) -> tuple[list[TaskRef], TaskRef]:
    """Add to ``g`` the candidate pairs per cell and the Fellegi-Sunter model fitted by EM on their summed pattern
    counts, of probabilistic linkage on the given keys (docs/metrics.md PLD; sdc_methods_comparison_chapter.txt
    sec. 3); ``em``: the EM's (max_iter, tol)."""
    n_patterns = n_patterns_for(len(keys), thresholds)
    originals, pairs = group_points(g, orig_parts, pair_parts, n, id_col, keys, center, scale, n)
    tree, cells, n_cells = split_graph(g, originals, n, cell_rows)
    routed = [g.task("route-masked", (i,), _route_points, ids, q, tree, n_cells)
              for i, (ids, _, q, _) in enumerate(pairs)]
    cands = [g.task("candidates", (c,), _candidates, cells[c], [g.item(r, c) for r in routed], thresholds,
                    per_record) for c in range(n_cells)]
    counts = g.reduce("patterns", [g.task("cell-patterns", (c,), _cell_patterns, cand, n_patterns)
                                   for c, cand in enumerate(cands)], np.add)
    return cands, g.task("model", (), _fit, counts, len(keys), len(thresholds) + 1, *em)


def probabilistic_linkage_graph(orig_parts: list, pair_parts: list, id_col: str, keys: list[str],
                                center: np.ndarray, scale: np.ndarray, n: int, cell_rows: int = PLD_CELL_ROWS,
                                thresholds: tuple[float, ...] = pld.DEFAULT_THRESHOLDS,
                                per_record: int = PLD_CANDIDATES, files: Path | None = None) -> Delayed:
    """Delayed (model, [correctly paired records, records with their own original among the candidates]);
    ``files``: see :func:`linkage_graph`."""
    g = TaskGraph("pld", [p.key for p in (*orig_parts, *pair_parts)], keys, center, scale, cell_rows, thresholds,
                  per_record, files=files)
    cands, model = _candidate_graph(g, orig_parts, pair_parts, id_col, keys, center, scale, n, cell_rows,
                                    thresholds, per_record)
    links = g.reduce("links", [g.task("cell-links", (c,), _cell_links, cand, model)
                               for c, cand in enumerate(cands)], np.add)
    return g.result(g.task("fit-and-links", (), _pair, model, links))


def _pair(first, second) -> tuple:
    """Two results as one."""
    return first, second


def _cell_tied_max_credit(cand: Candidates, model: pld.FellegiSunterModel) -> float:
    """Summed credit of one cell's masked records, each taking its maximum-weight candidate (ties shared)."""
    return pld.tied_max_credit(cand.rows, cand.cols, model.weights()[cand.codes], cand.masked_ids, cand.orig_ids)


def published_probabilistic_linkage_graph(orig_parts: list, pair_parts: list, id_col: str, keys: list[str],
                                          center: np.ndarray, scale: np.ndarray, n: int,
                                          cell_rows: int = PLD_CELL_ROWS,
                                          threshold: float = PLDPUB_THRESHOLD,
                                          per_record: int = PLDPUB_CANDIDATES, files: Path | None = None) -> Delayed:
    """Delayed summed credit of probabilistic linkage as the PLD column of the published Table 1 of
    sdc_methods_comparison_chapter.txt (sec. 3-4) was computed, found by calibration on the Census file
    (docs/reproduction.md): binary agreement per key, |x'_j - x_j| / S_j <= ``threshold`` (two levels of
    :func:`pld.agreement_levels`), m and u by EM on the candidate pairs' patterns (the PLD fit), and each masked
    record taking its maximum-weight candidate among its ``per_record`` nearest originals of its cell, with
    1/t credit among t tied candidates (:func:`pld.tied_max_credit`) instead of the one-to-one assignment. EM
    stops after PLDPUB_EM_MAX_ITER iterations or at PLDPUB_EM_TOL: on binary patterns it can creep for more than
    10,000 iterations without changing the order of the weights, which is all the decision uses (on the Census
    rows of docs/reproduction.md, 2,000 and 10,000 iterations give the same PLDpub). ``files``: see
    :func:`linkage_graph`."""
    g = TaskGraph("pld-published", [p.key for p in (*orig_parts, *pair_parts)], keys, center, scale, cell_rows,
                  threshold, per_record, files=files)
    cands, model = _candidate_graph(g, orig_parts, pair_parts, id_col, keys, center, scale, n, cell_rows,
                                    (threshold,), per_record, (PLDPUB_EM_MAX_ITER, PLDPUB_EM_TOL))
    return g.result(g.reduce("credit", [g.task("cell-credit", (c,), _cell_tied_max_credit, cand, model)
                                        for c, cand in enumerate(cands)], np.add))
