"""Column names the pipeline uses for its own columns, in one place: each module takes its name from here, and an
input column that would collide with one is refused (:func:`reserved_role`)."""

from __future__ import annotations

BLOCK_COL = "_block"  # blocking: the block of each record
POS_COL = "_pos"  # blocking: the record's position in the input
PROJ_COL = "_proj"  # blocking: projection scores, one column per axis (_proj0, _proj1, ...)
SUPPRESS_COL = "_suppress"  # local suppression: the pattern of suppressed keys
ORIGINAL_PREFIX = "_orig_"  # post-masking: the original value of a variable beside its masked one
MASKED_SUFFIX = "__masked"  # evaluation: the masked value of a variable beside its original one
COUNT_COL = "__count"  # frequency tables: records per combination
WEIGHT_COL = "__weight"  # categorical risk: summed sampling weights per combination
ROW_COL = "__row"  # categorical risk: a combination's position in its table
MASKED_ROW = "__m"  # categorical linkage: a masked combination's position
ORIGINAL_ROW = "__o"  # categorical linkage: an original combination's position
PATTERN_COL = "__code"  # categorical linkage: the agreement pattern of a candidate pair
SCOPE_COL = "__scope"  # rank fold: the code of the record's stratum
VALUE_COL = "__value"  # rank fold: the value of the variable being folded
RANGE_COL = "__range"  # rank fold: the partition a record moves to (rank-ordered, or back to the input's)
HOUSEHOLD_EXTRA_COL = "__household_extra"  # household suppression: values a record lost because a member lost them
DASK_PREFIX = "_partitions"  # Dask's shuffle adds _partitions (and _partitions_0) to the shuffled frame

RESERVED_NAMES = (BLOCK_COL, POS_COL, SUPPRESS_COL)
RESERVED_PREFIXES = ("__", PROJ_COL, ORIGINAL_PREFIX, DASK_PREFIX)  # "__": COUNT_COL, WEIGHT_COL, ... and Dask's
RESERVED_SUFFIXES = (MASKED_SUFFIX,)


def reserved_role(name: str) -> str | None:
    """How ``name`` collides with the pipeline's own column names ("is reserved", "begins with ...", "ends
    with ..."), or None when it is free."""
    if name in RESERVED_NAMES:
        return "is reserved"
    prefix = next((p for p in RESERVED_PREFIXES if name.startswith(p)), None)
    if prefix is not None:
        return f"begins with the reserved prefix {prefix!r}"
    suffix = next((s for s in RESERVED_SUFFIXES if name.endswith(s)), None)
    return f"ends with the reserved suffix {suffix!r}" if suffix is not None else None
