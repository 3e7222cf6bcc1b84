"""The masking method registry: one name, one parameter model and one call shape per method."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MdavParams(_Params):
    """MDAV microaggregation (statistical_databases_survey.txt, Microaggregation)."""

    k: int = Field(ge=2, description="minimum group size")
    group_size: int | None = Field(default=None, ge=1, description="attributes microaggregated together (None: all)")
    block_size: int = Field(default=10_000, ge=2, description="records per data-driven block (>= 2k)")


class RankSwapParams(_Params):
    """Rank swapping (statistical_databases_survey.txt, Data swapping and rank swapping)."""

    p: float = Field(gt=0, le=100, description="largest rank displacement, percent of the swap scope's size")


@dataclass(frozen=True)
class Method:
    """A registered masking method."""

    name: str
    params: type[_Params]
    summary: str


METHODS: dict[str, Method] = {
    "mdav": Method("mdav", MdavParams, "MDAV fixed-size multivariate microaggregation, blocked"),
    "rankswap": Method("rankswap", RankSwapParams, "rank swapping (Moore 1996), exact within each scope"),
}


def validate_params(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Return the method's parameters with defaults filled in; raise ValueError naming the bad parameter."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(sorted(METHODS))}")
    try:
        model = METHODS[method].params.model_validate(params)
    except ValidationError as exc:
        bad = "; ".join(
            f"parameter '{'.'.join(str(x) for x in e['loc'])}' of {method}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(bad) from None
    values = model.model_dump()
    if method == "mdav" and values["block_size"] < 2 * values["k"]:
        raise ValueError(f"parameter 'block_size' of mdav must be at least 2k = {2 * values['k']}")
    return values


def parse_cli_params(pairs: list[str]) -> dict[str, Any]:
    """Return {name: value} from ``k=v`` strings, values parsed as int, float or text."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(f"--param {pair!r} must look like name=value")
        name, raw = pair.split("=", 1)
        out[name.strip()] = _scalar(raw.strip())
    return out


def _scalar(raw: str) -> Any:
    """Return ``raw`` as int, float, bool/None or the string itself."""
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None, "null": None}.get(raw.lower(), raw)

