"""The release specification: a validated YAML document describing one protected release."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from sdc_tasks.errors import SpecError
from sdc_tasks.files import input_format, yaml_document
from sdc_tasks.masking.registry import METHODS, household_suppression_error, ruled_variables, validate_params
from sdc_tasks.metrics.catalogue import (
    CATEGORICAL_FAMILIES,
    DEFAULT_CATEGORICAL_FAMILIES,
    DEFAULT_FAMILIES,
    FAMILIES,
    OUTCOME_METHODS,
    gated_families,
    measure_of,
)
from sdc_tasks.tls import TlsFiles, check_tls_settings

OPTIONAL_ROLES = ("categorical", "ordinal", "weight", "pass_through", "drop", "sensitive")  # in the hash only when set
ACCOUNTING_ROLES = ("masked", "passed_through", "dropped", "id", "strata", "weight")  # what happens to a column
ROLE_CLASHES = (  # (role, the roles it cannot share a column with); continuous and categorical are checked apart
    ("direct_identifiers", ("key", "continuous", "categorical", "weight", "strata", "pass_through", "drop")),
    ("drop", ("key", "continuous", "categorical", "weight", "strata", "pass_through")),
    ("pass_through", ("key", "continuous", "categorical", "weight", "strata")),
    ("weight", ("key", "continuous", "categorical", "strata")),
    ("strata", ("continuous",)),
)


def _either(names: Iterable[str]) -> str:
    """'a, b or c'."""
    *rest, last = names
    return f"{', '.join(rest)} or {last}" if rest else last



class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class InputSpec(_Strict):
    """Where the original file is and how to read it."""

    path: str = Field(description="CSV file, Parquet file or Parquet dataset directory, or an SPSS (.sav), Stata "
                      "(.dta) or SAS (.sas7bdat, .xpt) file; relative to the spec file")
    format: Literal["auto", "csv", "parquet", "sav", "dta", "sas7bdat", "xpt"] = "auto"
    value_labels: Literal["codes", "labels"] = Field(
        default="codes", description="an SPSS, Stata or SAS file's labelled variables read as their codes (the "
        "labels kept in the release's manifest) or as their labels (keys and recodes then name labels)")


class VariableRoles(_Strict):
    """The role of each column in the release: every column of the input has one (the id column aside)."""

    direct_identifiers: list[str] = Field(default_factory=list, description="dropped from the release")
    key: list[str] = Field(default_factory=list, description="key variables an intruder may link on, in order "
                           "(each also continuous or categorical)")
    continuous: list[str] = Field(default_factory=list, description="continuous variables to mask and evaluate")
    categorical: list[str] = Field(default_factory=list,
                                   description="categorical variables, masked and evaluated as categories")
    ordinal: dict[str, list[Any] | None] = Field(
        default_factory=dict, description="ordinal categorical variables -> their categories in order (null: the "
        "sorted values of the data)")
    weight: str | None = Field(default=None, description="sampling weight column, passed through unmasked")
    strata: str | None = Field(default=None, description="categorical column; masking runs within each stratum")
    pass_through: list[str] = Field(default_factory=list, description="published unchanged (not sensitive)")
    drop: list[str] = Field(default_factory=list, description="left out of the release")
    sensitive: list[str] = Field(default_factory=list, description="variables whose disclosure through the keys "
                                 "the ldiversity family measures (none of them a key; each also has its role)")

    def named(self) -> dict[str, list[str]]:
        """{role: the columns it names} for every role but ordinal (a part of categorical)."""
        return {"direct_identifiers": self.direct_identifiers, "key": self.key, "continuous": self.continuous,
                "categorical": self.categorical, "weight": [self.weight] if self.weight else [],
                "strata": [self.strata] if self.strata else [], "pass_through": self.pass_through,
                "drop": self.drop}

    @model_validator(mode="after")
    def _disjoint(self) -> "VariableRoles":
        named = self.named()
        for role, names in named.items():
            if len(set(names)) != len(names):
                raise ValueError(f"{role} lists a variable twice")
        if not self.continuous and not self.categorical:
            raise ValueError("continuous must name at least one variable (or categorical, for categorical data)")
        both = set(self.continuous) & set(self.categorical)
        if both:
            raise ValueError(f"{sorted(both)} cannot be both continuous and categorical")
        for role, others in ROLE_CLASHES:
            clash = set(named[role]) & {v for other in others for v in named[other]}
            if clash:
                raise ValueError(f"{role} {sorted(clash)} cannot also be {_either(others)}: give each column one "
                                 "role")
        keyed = [v for v in self.sensitive if v in self.key]
        if keyed:
            raise ValueError(f"sensitive variable {keyed[0]!r} is also a key: l-diversity measures what the keys "
                             "disclose of a variable that is not one of them")
        roleless = [v for v in self.sensitive if not any(v in names for names in named.values())]
        if roleless:
            raise ValueError(f"sensitive variable {roleless[0]!r} must also have a role (categorical, continuous, "
                             "pass_through, ...)")
        loose = [k for k in self.key if k not in {*self.continuous, *self.categorical}]
        if loose:
            raise ValueError(f"key variable {loose[0]!r} must also be listed under continuous or categorical (keys "
                             "are masked)")
        for var, order in self.ordinal.items():
            if var not in self.categorical:
                raise ValueError(f"ordinal.{var}: {var!r} is not listed in categorical")
            if order is not None and not all(isinstance(c, (str, int, float)) for c in order):
                raise ValueError(f"ordinal.{var} must list its categories in order as text or numbers (or be null), "
                                 "not lists or mappings")
            if order is not None and len(set(order)) != len(order):
                raise ValueError(f"ordinal.{var} lists a category twice")
        return self


class StepSpec(_Strict):
    """One masking step: a method, its parameters and the variables it masks (default: all continuous)."""

    method: str
    params: dict[str, Any] = Field(default_factory=dict)
    variables: list[str] | None = None

    @field_validator("method")
    @classmethod
    def _known_method(cls, v: str) -> str:
        if v not in METHODS:
            raise ValueError(f"unknown method {v!r}; known: {', '.join(sorted(METHODS))}")
        return v

    @model_validator(mode="after")
    def _params(self, info: ValidationInfo) -> "StepSpec":
        self.params = validate_params(self.method, self.params, (info.context or {}).get("base_dir", "."))
        return self


class GateSpec(_Strict):
    """Release gate: a risk measure above its limit refuses the release."""

    max: dict[str, float] = Field(default_factory=dict, description="metric key -> largest allowed value")
    min_group_size: int | None = Field(default=None, ge=2, description="microaggregation steps must use k >= this")


class OutputSpec(_Strict):
    """Where the release is written."""

    dir: str = Field(description="output directory, relative to the spec file; created atomically")
    overwrite: bool = False


class TlsSpec(_Strict):
    """The client's TLS files for a tls:// scheduler (PEM; relative to the spec file)."""

    ca_file: str | None = Field(default=None, description="CA certificate that signed the cluster's certificates")
    cert: str | None = Field(default=None, description="the client's certificate")
    key: str | None = Field(default=None, description="the client's private key")


class DaskSpec(_Strict):
    """The Dask cluster: a LocalCluster with N workers (on 127.0.0.1), or an existing scheduler by address,
    over TLS with ``tls`` when the address is tls://."""

    address: str | None = None
    workers: int = Field(default=2, ge=1)
    threads_per_worker: int = Field(default=1, ge=1)
    memory_limit: str = "auto"
    tls: TlsSpec | None = Field(default=None, exclude_if=lambda tls: tls is None)

    @model_validator(mode="after")
    def _tls_matches_address(self) -> "DaskSpec":
        check_tls_settings(self.address, TlsFiles(**(self.tls.model_dump() if self.tls else {})))
        return self


class HouseholdSpec(_Strict):
    """The households of a person file: the household id column and the household-level variables (the same for
    every member of a household)."""

    id: str = Field(description="household id column (it also has a role: pass_through, or drop to leave it out of "
                    "the release)")
    variables: list[str] = Field(default_factory=list, description="household-level categorical variables, "
                                 "checked to be constant within each household and masked once per household")


class ReleaseSpec(_Strict):
    """A whole release: input, roles, ordered masking steps, metrics, gate, output, seed and cluster."""

    name: str = "release"
    input: InputSpec
    id_column: str = "record_id"
    create_id: bool = Field(default=False, description="add id_column as the row position when the input has none")
    variables: VariableRoles
    steps: list[StepSpec] = Field(min_length=1)
    metrics: list[Literal[FAMILIES]] = Field(default_factory=lambda: list(DEFAULT_FAMILIES))
    max_key_vars: int = Field(default=7, ge=1, description="DLD uses the first min(len(key), max_key_vars) keys")
    gate: GateSpec = Field(default_factory=GateSpec)
    output: OutputSpec
    seed: int = Field(default=0, ge=0)
    dask: DaskSpec = Field(default_factory=DaskSpec)
    households: HouseholdSpec | None = Field(default=None, description="household id and household-level "
                                             "variables: household risk in cat_risk, constancy checked, "
                                             "household-level variables masked once per household")
    base_dir: str = Field(default=".", exclude=True, description="directory relative paths resolve against")

    @model_validator(mode="after")
    def _steps_use_known_variables(self) -> "ReleaseSpec":
        for i, step in enumerate(self.steps):
            self._check_step_variables(i)
            if step.params.get("threshold") is not None and step.params.get("weight") is None:
                step.params["weight"] = self.variables.weight  # the risk a threshold limits is the release's
        self._check_metric_variables()
        if self.gate.min_group_size is not None:
            for i, step in enumerate(self.steps):
                k = step.params.get("k")
                if k is not None and min(k if isinstance(k, list) else [k]) < self.gate.min_group_size:
                    raise ValueError(
                        f"steps.{i}.params.k = {k} is below gate.min_group_size = {self.gate.min_group_size}"
                    )
        for measure in self.gate.max:
            needs = gated_families(measure)
            if needs is None:
                raise ValueError(f"gate.max.{measure}: unknown measure, or one a maximum cannot limit (use a "
                                 "metrics.json key where lower is better, such as DLD, PLD, ID, DLD_3, SDID or score; "
                                 "docs/metrics.md)")
            missing = [f for f in needs if f not in self.metrics]
            if missing:
                raise ValueError(f"gate.max.{measure}: needs metric family {missing[0]!r} in metrics")
            reporters = OUTCOME_METHODS.get(measure_of(measure).family)
            if reporters and not any(s.method in reporters for s in self.steps):
                raise ValueError(f"gate.max.{measure}: needs a {' or '.join(reporters)} step")
        id_roles = [role for role, names in self.variables.named().items() if self.id_column in names]
        if id_roles:
            raise ValueError(f"id_column {self.id_column!r} cannot also be listed under variables.{id_roles[0]}")
        self._check_every_variable_masked()
        self._check_households()
        return self

    def _check_households(self) -> None:
        """Raise ValueError naming the field when the household id has no role, is masked or is the id column, a
        household-level variable is not categorical, or a step suppresses one with missing values as a category
        (extra suppressions for whole households would break k-anonymity there)."""
        if self.households is None:
            return
        hid, roles = self.households.id, self.variables
        if hid == self.id_column or hid in {*roles.continuous, *roles.categorical, *roles.key}:
            raise ValueError(f"households.id {hid!r} must be neither the id column nor a masked variable: list it "
                             "under pass_through or drop")
        if not any(hid in names for names in roles.named().values()):
            raise ValueError(f"households.id {hid!r} has no role: list it under pass_through or drop")
        stray = [v for v in self.households.variables if v not in roles.categorical]
        if stray:
            raise ValueError(f"households.variables: {stray[0]!r} is not listed in variables.categorical")
        for i, step in enumerate(self.steps):
            homes = [v for v in self.step_variables(i) if v in self.households.variables]
            reason = household_suppression_error(step.method, step.params, homes)
            if reason:
                raise ValueError(f"steps.{i}: {reason}")

    def swap_risk_variables(self) -> list[str]:
        """The risk variables of the spec's record_swap steps that no step masks: published unchanged, they are
        protected by the swapped geography (docs/recordswap.md), so they may be categorical keys of the risk
        measures without a masking step of their own."""
        named = [v for s in self.steps if s.method == "record_swap" for v in s.params["risk_variables"]]
        return [v for v in dict.fromkeys(named) if v not in self.masked_variables()]

    def _check_every_variable_masked(self) -> None:
        """Raise ValueError naming a continuous or categorical variable (the strata column aside) that no step
        masks: a column published unchanged must say so under pass_through (or be a risk variable of a
        record_swap step, ``swap_risk_variables``)."""
        roles, masked = self.variables, {*self.masked_variables(), *self.swap_risk_variables()}
        for role in ("continuous", "categorical"):
            idle = [v for v in getattr(roles, role) if v not in masked and v != roles.strata]
            if idle:
                raise ValueError(f"variables.{role}: {idle[0]!r} is masked by no step: mask it in a step, or list it "
                                 "under variables.pass_through to publish it unchanged")

    def _check_step_variables(self, i: int) -> None:
        """Raise ValueError naming step ``i`` and the variable when it masks a variable of another kind than its
        method's (continuous or categorical; ordinal for top and bottom coding) or the strata column."""
        step, roles = self.steps[i], self.variables
        method = METHODS[step.method]
        declared = roles.categorical if method.kind == "categorical" else roles.continuous
        for v in step.variables or []:
            if v not in declared:
                raise ValueError(f"steps.{i}.variables: {v!r} is not listed in variables.{method.kind}"
                                 + (f" ({step.method} masks categorical variables)" if method.kind == "categorical"
                                    else ""))
            if method.ordinal and v not in roles.ordinal:
                raise ValueError(f"steps.{i}.variables: {v!r} is not listed in variables.ordinal ({step.method} "
                                 "needs ordered categories)")
            if v == roles.strata:
                raise ValueError(f"steps.{i}.variables: {v!r} is the strata column, which is not masked")
        if not self.step_variables(i):
            needed = "variables.ordinal" if method.ordinal else f"variables.{method.kind}"
            raise ValueError(f"steps.{i}: {step.method} masks {method.kind} variables but {needed} names none")

    def _check_metric_variables(self) -> None:
        """Metric families follow the variable kinds: by default the continuous families when there are continuous
        variables, plus cat_il and cat_risk when there are categorical ones; a family asked for without its
        variables fails."""
        roles = self.variables
        if "metrics" not in self.model_fields_set:
            self.metrics = ([*DEFAULT_FAMILIES] if roles.continuous else []) + \
                ([*DEFAULT_CATEGORICAL_FAMILIES] if roles.categorical else [])
            return
        for family in self.metrics:
            categorical = family in CATEGORICAL_FAMILIES
            if not (roles.categorical if categorical else roles.continuous):
                kind = "categorical" if categorical else "continuous"
                raise ValueError(f"metrics: family {family!r} evaluates {kind} variables but variables.{kind} is "
                                 "empty")

    def resolve(self, path: str) -> Path:
        """Return ``path`` resolved against the spec's directory."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (Path(self.base_dir) / p).resolve()

    @property
    def input_path(self) -> Path:
        """The original file's resolved path."""
        return self.resolve(self.input.path)

    @property
    def input_format(self) -> str:
        """The original file's format, "csv" or "parquet" (told from the file when the spec says "auto")."""
        return input_format(self.input_path, self.input.format)

    @property
    def output_dir(self) -> Path:
        """The release directory's resolved path."""
        return self.resolve(self.output.dir)

    @property
    def dask_tls(self) -> TlsFiles:
        """The dask.tls files, resolved against the spec's directory (none when the section is absent)."""
        named = self.dask.tls.model_dump(exclude_none=True) if self.dask.tls else {}
        return TlsFiles(**{field: str(self.resolve(path)) for field, path in named.items()})

    @property
    def linkage_keys(self) -> list[str]:
        """Continuous key variables used for distance linkage (first max_key_vars; default all continuous ones)."""
        keys = [k for k in self.variables.key if k not in self.variables.categorical] or self.variables.continuous
        return keys[: self.max_key_vars]

    @property
    def categorical_keys(self) -> list[str]:
        """The categorical key variables, in key order."""
        return [k for k in self.variables.key if k in self.variables.categorical]

    def category_orders(self, observed: Mapping[str, Iterable] | None = None) -> dict[str, list | None]:
        """{ordinal variable: its categories in order}: the declared order, or else the sorted values of
        ``observed`` (variable -> values found in the data; None where not given)."""
        observed = observed or {}
        return {v: list(order) if order is not None else (sorted(set(observed[v])) if v in observed else None)
                for v, order in self.variables.ordinal.items()}

    def step_variables(self, i: int) -> list[str]:
        """The variables masked by step ``i``: its own list, or by default those its per-variable rules name
        (recode, top_bottom_coding), else every variable of its method's kind (continuous; categorical; the
        ordinal ones for top and bottom coding; the categorical keys, or else every categorical variable, for
        local suppression; never the strata column)."""
        step, roles = self.steps[i], self.variables
        method = METHODS[step.method]
        if step.variables:
            return step.variables
        if ruled_variables(step.params):
            return ruled_variables(step.params)
        if method.kind == "continuous":
            return list(roles.continuous)
        categorical = [v for v in roles.categorical if v != roles.strata]
        if method.ordinal:
            return [v for v in categorical if v in roles.ordinal]
        if method.on_keys:
            return [v for v in self.categorical_keys if v != roles.strata] or categorical
        return categorical

    def masked_variables(self) -> list[str]:
        """The variables some step masks, in the order the steps first name them."""
        return list(dict.fromkeys(v for i in range(len(self.steps)) for v in self.step_variables(i)))

    def column_accounting(self) -> dict[str, str]:
        """{column: what the release does with it} for the id column and every column the roles name."""
        roles = self.variables
        return column_accounting([*roles.pass_through, *self.swap_risk_variables()], self.id_column,
                                 self.masked_variables(), roles.strata, roles.weight,
                                 [*roles.direct_identifiers, *roles.drop])

    def spec_hash(self) -> str:
        """SHA-256 of the canonical JSON form of the spec (paths as written, not resolved); the categorical,
        pass_through, drop and sensitive roles, the households and the input's value_labels enter it only when
        set, so a spec without them keeps the hash it had before they existed."""
        unset_fields = {"households"} if self.households is None else set()
        data = self.model_dump(mode="json", exclude=unset_fields)
        if "value_labels" not in self.input.model_fields_set:
            del data["input"]["value_labels"]
        unset = [r for r in OPTIONAL_ROLES if r not in self.variables.model_fields_set]
        data["variables"] = {r: v for r, v in data["variables"].items() if r not in unset}
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def column_accounting(columns: Iterable[str], id_column: str, masked: Iterable[str], strata: str | None = None,
                      weight: str | None = None, dropped: Iterable[str] = ()) -> dict[str, str]:
    """{column: "id", "strata", "weight", "masked", "dropped" or, for the rest of ``columns``, "passed_through"}:
    what a release or ``sdc mask`` does with each column (the manifest's and the summary's accounting)."""
    accounting = {c: "passed_through" for c in columns}
    accounting.update({c: "dropped" for c in dropped})
    accounting.update({c: "masked" for c in masked})
    accounting.update({c: role for c, role in ((weight, "weight"), (strata, "strata"), (id_column, "id")) if c})
    return accounting


def columns_by_role(accounting: dict[str, str]) -> dict[str, list[str]]:
    """{accounting role: its columns, in accounting order} for every role of ACCOUNTING_ROLES."""
    return {role: [c for c, r in accounting.items() if r == role] for role in ACCOUNTING_ROLES}


def _field_errors(exc: ValidationError) -> str:
    """Return one line per pydantic error, each naming its dotted field path."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(spec)"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"spec field '{loc}': {msg}")
    return "\n".join(lines)


def parse_spec(data: dict[str, Any], base_dir: str | Path = ".") -> ReleaseSpec:
    """Return the validated spec for a mapping; raise SpecError naming each bad field."""
    if not isinstance(data, dict):
        raise SpecError("a release spec must be a YAML mapping at the top level")
    try:
        return ReleaseSpec.model_validate({**data, "base_dir": str(base_dir)}, context={"base_dir": str(base_dir)})
    except ValidationError as exc:
        raise SpecError(_field_errors(exc)) from None


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> ReleaseSpec:
    """Return the validated spec read from a YAML file, with optional top-level overrides merged in."""
    p = Path(path)
    data = yaml_document(p, "spec", SpecError)
    if not isinstance(data, dict):
        raise SpecError(f"spec file {p} must hold a YAML mapping")
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return parse_spec(data, base_dir=p.resolve().parent)
