"""The release stages as plain library functions (``sdc_tasks.pipeline.run`` runs them in order; the Prefect flow
runs the same functions, each as a task).

Each stage takes the spec and the run's paths (:class:`ReleasePaths`) and returns a small JSON-able summary; data
moves between stages as Parquet files, never as return values, so a retried stage restarts from paths and no
lazy frame outlives the stage that built it. Validation reads the input file once and writes it as a Parquet
checkpoint; every later stage reads the checkpoint, never the input file.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import dask.dataframe as dd

from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.evaluation.profile import release_profile
from sdc_tasks.io import (
    parquet_row_counts,
    read_checkpoint,
    read_input,
    read_table,
    write_parquet,
    write_scratch_parquet,
)
from sdc_tasks.masking.apply import Staged, StepContext, restore_order, scope_count
from sdc_tasks.masking.methods import MASKED_VALUES, apply_step, blocks_written, masked_values_written, outcome_for
from sdc_tasks.masking.methods import needs_blocks as method_needs_blocks
from sdc_tasks.masking.registry import METHODS
from sdc_tasks.outputs import scratch_area
from sdc_tasks.pipeline.preflight import check_roles
from sdc_tasks.pipeline.spec import ReleaseSpec
from sdc_tasks.scheduling import shuffle_method
from sdc_tasks.stats.frequencies import sorted_categories
from sdc_tasks.validation import check_households, fewest_records, load_checked

MASKED_DIR = "masked"
WORK_DIR = "_work"


@dataclass(frozen=True)
class ReleasePaths:
    """Where a release writes inside its private directory ``root``: the input's checkpoint and each step's
    scratch and output under the work directory (removed before the release is published), masked/ at the top."""

    root: Path

    @property
    def checkpoint(self) -> Path:
        """The input file as validated, in Parquet (``io.read_checkpoint``)."""
        return self.root / WORK_DIR / "input"

    @property
    def masked(self) -> Path:
        """The published masked dataset (the last step's output)."""
        return self.root / MASKED_DIR

    def work(self, i: int) -> Path:
        """Scratch directory of step ``i`` (blocks, masked values)."""
        return self.root / WORK_DIR / f"step-{i:02d}"

    def output(self, i: int, last: bool) -> Path:
        """Output of step ``i``: the published masked/ dataset for the last step."""
        return self.masked if last else self.work(i) / "output"


def validate_input(spec: ReleaseSpec, checkpoint: Path) -> dict:
    """Read the original file once, writing it to ``checkpoint`` as Parquet, and check it against the spec on the
    checkpoint; raise InputError naming the column/record/parameter at fault (every column has a role; continuous,
    continuous key and weight variables must be numbers; categorical ones may hold any values, missing included;
    every stratum holds enough records for each step). Returns the file's facts (n_records, partitions,
    constant_variables)."""
    roles = spec.variables
    what = f"input {spec.input_path}"
    source = read_input(spec.input_path, spec.input.format, labels=spec.input.value_labels == "labels")
    check_roles(source.columns, spec, what)
    group_sizes = [fewest_records(step.method, step.params, f"steps.{i}.params.{{}}", f"steps.{i} ({step.method})")
                   for i, step in enumerate(spec.steps)]
    numeric = [*roles.continuous, *(k for k in roles.key if k not in roles.categorical), *filter(None, [roles.weight])]
    named = [*roles.direct_identifiers, *roles.categorical, *roles.pass_through, *roles.drop]
    checked, facts = load_checked(spec.input_path, spec.id_column, numeric, what, spec.input.format, spec.create_id,
                                  named, roles.strata, group_sizes, source=source, checkpoint=checkpoint,
                                  weight=roles.weight)
    homes = spec.households
    if homes is not None:
        masked = any(v in homes.variables for i in range(len(spec.steps)) for v in spec.step_variables(i))
        check_households(checked, homes.id, homes.variables, what, strata=roles.strata if masked else None)
    return facts


def original_records(spec: ReleaseSpec, checkpoint: Path) -> dd.DataFrame:
    """The original file as validated (its checkpoint), with the id column."""
    return read_checkpoint(checkpoint, spec.id_column, keep_partitions=spec.input_format == "csv")


def step_source(spec: ReleaseSpec, i: int, paths: ReleasePaths) -> dd.DataFrame:
    """The input of step ``i``: the original minus direct identifiers and dropped columns (first step) or the
    previous step's output. A household id the release drops stays in the steps' inputs, which mask
    household-level variables once per household; the last step's write leaves it out (:func:`unpublished`)."""
    if i > 0:
        return read_table(paths.output(i - 1, last=False), "parquet")
    ddf = original_records(spec, paths.checkpoint)
    drop = [c for c in [*spec.variables.direct_identifiers, *spec.variables.drop]
            if c in ddf.columns and c not in unpublished(spec)]
    return ddf.drop(columns=drop) if drop else ddf


def unpublished(spec: ReleaseSpec) -> list[str]:
    """The working columns the steps carry that masked/ leaves out: the household id when the spec declares
    households and drops it (its role is not pass_through)."""
    if spec.households is None or spec.households.id in spec.variables.pass_through:
        return []
    return [spec.households.id]


def uses_original(method: str) -> bool:
    """Whether a method reads the original records beside its input: the after-masking methods (rescale,
    postmask) and those whose block stage carries each record's original values (synthetic_postmask)."""
    return METHODS[method].after_masking or METHODS[method].carries_original


def _step_args(spec: ReleaseSpec, i: int, paths: ReleasePaths) -> tuple[str, list[str], dict, StepContext]:
    """Method, variables, parameters and context of step ``i`` (the original records as ``reference`` only for a
    method that uses them)."""
    step = spec.steps[i]
    reference = step_source(spec, 0, paths) if uses_original(step.method) else None
    homes = spec.households
    ctx = StepContext(seed=spec.seed, step=i, id_column=spec.id_column, strata=spec.variables.strata,
                      reference=reference, category_orders=dict(spec.variables.ordinal),
                      household=homes.id if homes else None,
                      household_variables=tuple(homes.variables if homes else ()))
    return step.method, spec.step_variables(i), step.params, ctx


def needs_blocks(spec: ReleaseSpec, i: int) -> bool:
    """Whether step ``i``'s method runs on data-driven blocks."""
    return method_needs_blocks(spec.steps[i].method)


def block_stage(spec: ReleaseSpec, i: int, paths: ReleasePaths) -> dict:
    """Stage 'block': write step ``i``'s input as block-aligned Parquet in its work directory."""
    method, variables, params, ctx = _step_args(spec, i, paths)
    return {"blocks": blocks_written(method, step_source(spec, i, paths), variables, params, ctx, paths.work(i))}


def mask_stage(spec: ReleaseSpec, i: int, paths: ReleasePaths) -> dict:
    """Stage 'mask': run step ``i``'s kernel per block (or per scope) and write positions and masked values (the
    blocks it read removed after: ``masked_values_written``); returns the number of scopes of a whole-scope method
    (None for a blocked one: its block stage counts) and, for a post-masking or record swapping step, what it
    reached (``PostMaskOutcome.as_dict``, ``SwapOutcome.as_dict``; None otherwise)."""
    method, variables, params, ctx = _step_args(spec, i, paths)
    source = step_source(spec, i, paths)
    outcome = outcome_for(method, params, masked_values_written(method, source, variables, params, ctx, paths.work(i)))
    return {"blocks": None if needs_blocks(spec, i) else scope_count(source, ctx),
            "outcome": None if outcome is None else outcome.as_dict()}


def write_stage(spec: ReleaseSpec, i: int, paths: ReleasePaths) -> dict:
    """Stage 'write': put step ``i``'s masked values back in input order and write the step's output (the last
    step's: masked/, without the working columns of :func:`unpublished`); then remove what only this stage read,
    the step's masked values and the step's input when an earlier step wrote it."""
    variables = spec.step_variables(i)
    last = i == len(spec.steps) - 1
    target = paths.output(i, last=last)
    masked = read_table(paths.work(i) / MASKED_VALUES, "parquet")
    hidden = unpublished(spec) if last else []
    with scratch_area("restore", paths.work(i)) as files:
        staged = restore_order(step_source(spec, i, paths), masked, variables, files)
        frame = staged.frame.drop(columns=hidden) if hidden else staged.frame
        (write_parquet if last else write_scratch_parquet)(frame, target)
    rows = int(sum(parquet_row_counts(target)))
    remove_tree(paths.work(i) / MASKED_VALUES)
    if i > 0:
        remove_tree(paths.output(i - 1, last=False))
    return {"rows": rows}


def evaluate_release(spec: ReleaseSpec, paths: ReleasePaths) -> dict:
    """The metrics.json mapping of the release: every metric family of the spec in one evaluation of masked/
    against the original (one pairing, one sketch of the moments, the scores once), with the seed and the
    method chain; beside them, under PROFILES_KEY, the report's continuous variable profiles where the evaluation
    could compute them from its own sorts (profile_release takes them)."""
    original = original_records(spec, paths.checkpoint)
    masked = read_table(paths.masked, "parquet")
    roles = spec.variables
    seen = intruder_view(spec, original)
    household = spec.households.id if spec.households is not None else None
    sources = (paths.checkpoint, paths.masked)
    if household is not None and household not in masked.columns:  # left out of the release: joined back by id
        masked = masked.merge(original[[spec.id_column, household]], on=spec.id_column, how="left",
                              shuffle_method=shuffle_method())
        sources = None
    metrics = evaluate(original, masked, spec.id_column, list(roles.continuous),
                       [*spec.linkage_keys, *spec.categorical_keys], tuple(spec.metrics),
                       categorical=list(roles.categorical), ordinal=category_orders(spec, original),
                       weight=roles.weight, intruder_original=seen.frame if seen else None,
                       sensitive=list(roles.sensitive), household=household, profile=True,
                       work_dir=paths.root / WORK_DIR, sources=sources)
    return {**metrics, "seed": spec.seed, "method": "+".join(s.method for s in spec.steps)}


def intruder_view(spec: ReleaseSpec, original: dd.DataFrame) -> Staged | None:
    """The original as an intruder sees it through the release's published recodes: the spec's ``recode`` steps
    (deterministic rules, documented with the release) applied to it in order, so that its keys and the masked
    file's are in the same categories for linkage; None when the spec has no recode step. Keep the result alive
    until its frame is computed (it pins its scratch files)."""
    steps = [i for i, s in enumerate(spec.steps) if s.method == "recode"]
    if not steps:
        return None
    frame, pinned = original, []
    for i in steps:
        staged = apply_step(frame, "recode", spec.step_variables(i), spec.steps[i].params,
                            StepContext(spec.seed, i, spec.id_column, spec.variables.strata))
        frame = staged.frame
        pinned.append(staged)
    return Staged(frame, 0, tuple(pinned))


def profile_release(spec: ReleaseSpec, paths: ReleasePaths, profiles: list[dict] | None = None) -> dict:
    """The per-variable figures of the release's report (sdc_tasks.evaluation.profile.release_profile): masked/
    against the original, continuous and categorical variables; ``profiles``: the continuous variables' figures
    when the evaluation computed them (evaluate_release)."""
    original = original_records(spec, paths.checkpoint)
    return release_profile(original, read_table(paths.masked, "parquet"), spec.id_column,
                           list(spec.variables.continuous), list(spec.variables.categorical), profiles)


def category_orders(spec: ReleaseSpec, original: dd.DataFrame) -> dict[str, list]:
    """Each ordinal variable's categories in order: as declared, or else the sorted values of the original file."""
    undeclared = [v for v, order in spec.variables.ordinal.items() if order is None]
    return spec.category_orders(sorted_categories(original, undeclared))


def remove_tree(path: Path) -> None:
    """Delete a directory tree if it exists."""
    if path.exists():
        shutil.rmtree(path)
