"""The headline block that opens every report and the Jupyter view of :class:`sdc_tasks.results.Metrics`: the
verdict (PUBLISHED, REFUSED, HELD or EVALUATED), each gate check with its value, limit and margin, the few numbers
that decide a release (information loss, linkage and interval disclosure, the score; for categorical keys the
k-anonymity violations, sample uniques and individual risk), records in and out, the method chain and the run
time. Built from the summary dict of :meth:`sdc_tasks.pipeline.summary.ReleaseSummary.as_dict` or from a
metrics mapping alone; rendered as Markdown lines or HTML.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sdc_tasks.masking.postmask_outcome import outcome_from_dict
from sdc_tasks.metrics.catalogue import BEFORE, CHANGE, anchor_of, measure_of
from sdc_tasks.report.document import format_value, html_text, unit_value_text
from sdc_tasks.report.metric_table import change_text

HEADLINE_KEYS = ("IL", "PIL", "DLD", "PLD", "ID", "score", "kanon_violations_3", "sample_uniques", "indiv_risk_max",
                 "PLD_cat")
"""The keys a headline shows, those computed, in this order: information loss, linkage and interval disclosure,
the score (sdc_methods_comparison_chapter.txt sec. 4), then for categorical keys the records violating
3-anonymity, the sample uniques, the largest individual risk and categorical linkage (chapter sec. 5;
docs/categorical.md). A gated measure not among them is shown after them."""

STAND_INS = {"score": "score_simple"}
"""A key shown in place of a headline key that was not computed (score_simple when PLD, so score, is missing)."""

NEGATED_OPS = {"<=": ">", "<": ">=", ">=": "<", ">": "<=", "==": "!="}


@dataclass(frozen=True)
class KeyNumber:
    """One headline number: its key, value, catalogue unit, direction, anchor, the gate limit on it (if any) and,
    for a figure computed on the original file too, its value there (``<key>_before``) and its change in percent
    (``<key>_change_percent``; None when not finite)."""

    key: str
    value: float
    unit: str
    direction: str
    anchor: str
    limit: float | None
    before: float | None = None
    change_percent: float | None = None


@dataclass(frozen=True)
class Headline:
    """What a report shows first: the verdict and why, the gate checks as formatted rows (measure, value, limit,
    margin, result), the key numbers, the run facts as (label, text) pairs and the warnings (a post-masking
    step that stopped short of TargetE)."""

    status: str
    detail: str
    checks: list[tuple[str, str, str, str, str]]
    numbers: list[KeyNumber]
    facts: list[tuple[str, str]]
    warnings: tuple[str, ...] = ()


def failing_check_text(check: dict) -> str:
    """A failed gate check as a sentence such as "DLD = 7.2 > limit 5.0"."""
    op = NEGATED_OPS.get(check["op"], f"fails {check['op']}")
    return f"{check['measure']} = {format_value(check['value'])} {op} limit {format_value(check['limit'])}"


def release_status(gate: dict | None) -> tuple[str, str]:
    """(PUBLISHED | REFUSED | HELD | EVALUATED, explanation) for the release gate's outcome (``gate`` None: an
    evaluation of two files, which publishes nothing)."""
    if gate is None:
        return "EVALUATED", "evaluation only: no release gate applies and nothing is published"
    failed = "; ".join(failing_check_text(c) for c in gate["checks"] if not c["passed"]) or "none recorded"
    all_passed = f"all {len(gate['checks'])} gate checks passed"
    if gate["published"] and gate["passed"]:
        return "PUBLISHED", all_passed
    if gate["published"]:
        return "PUBLISHED", f"the output was published although the gate failed: {failed}"
    if not gate["passed"]:
        return "REFUSED", f"failing checks: {failed}"
    return "HELD", f"{all_passed}, but the output was not published"


def params_text(params: dict) -> str:
    """Method parameters as "k=3, p=15", those left unset (None, an empty list) left out; per-variable rules as
    "rules: age breaks=[15, 25, 65]; roof map=5 categories into 3" (a recode map by its size, never its
    categories); other nested values as compact JSON."""
    return ", ".join(
        f"rules: {'; '.join(f'{v} {_rule_text(rule)}' for v, rule in value.items())}" if key == "rules"
        and isinstance(value, dict) else
        f"{key}={value if isinstance(value, (str, int, float)) else json.dumps(value, sort_keys=True)}"
        for key, value in params.items() if value is not None and not (isinstance(value, (list, dict)) and not value)
    ) or "none"


def _rule_text(rule: dict) -> str:
    """One variable's rule as "breaks=[15, 25, 65]", "map=5 categories into 3", "top=40000, top_value=25000"."""
    def shown(value) -> str:
        if isinstance(value, dict):
            return f"{len(value)} categories into {len(set(map(str, value.values())))}"
        if isinstance(value, list):
            return "[" + ", ".join(format(x, "g") if isinstance(x, float) else str(x) for x in value) + "]"
        return format(value, "g") if isinstance(value, float) else str(value)

    return ", ".join(f"{field}={shown(value)}" for field, value in rule.items())


def method_chain(steps: list[dict]) -> str:
    """The masking steps in order as "md (k=7, group_size=3) -> local_suppression (k=3)"."""
    return " -> ".join(f"{s['method']} ({params_text(s['params'])})" for s in steps) or "no masking step"


def check_rows(gate: dict | None) -> list[tuple[str, str, str, str, str]]:
    """Each gate check as (measure, value, "op limit", margin, pass | FAIL); the margin is what is left before
    the limit (limit - value for a maximum), negative when the check fails, "n/a" when the value is missing."""
    return [(c["measure"], format_value(c["value"]), f"{c['op']} {format_value(c['limit'])}",
             "n/a" if c.get("margin") is None else format_value(c["margin"]), "pass" if c["passed"] else "FAIL")
            for c in (gate or {"checks": []})["checks"]]


def gate_maxima(gate: dict | None) -> dict[str, float]:
    """Measure -> limit of the gate's checks (none for an evaluation, which has no gate)."""
    return {c["measure"]: c["limit"] for c in (gate or {"checks": []})["checks"]}


def headline_keys(metrics: dict, gate: dict | None = None) -> list[str]:
    """The keys a headline shows: HEADLINE_KEYS computed (or their STAND_INS), then the other gated measures."""
    keys = [k if k in metrics else STAND_INS.get(k, k) for k in HEADLINE_KEYS]
    return [k for k in dict.fromkeys([*keys, *gate_maxima(gate)]) if k in metrics]


def key_numbers(metrics: dict, gate: dict | None = None) -> list[KeyNumber]:
    """The headline's keys (:func:`headline_keys`) with their values, catalogue unit, direction and anchor, the
    gate's limit on each and, where the metrics hold them, the original file's value and the change."""
    limits = gate_maxima(gate)
    return [KeyNumber(k, float(metrics[k]), measure_of(k).unit, measure_of(k).direction, anchor_of(k), limits.get(k),
                      metrics.get(k + BEFORE), metrics.get(k + CHANGE))
            for k in headline_keys(metrics, gate)]


def step_warnings(steps: list[dict]) -> tuple[str, ...]:
    """The warning line of each post-masking step that stopped short of TargetE, "step N: ..."."""
    warnings = ((i, outcome_from_dict(s["outcome"]).warning()) for i, s in enumerate(steps, start=1)
                if s.get("outcome"))
    return tuple(f"step {i}: {text.removeprefix('warning: ')}" for i, text in warnings if text)


def _seconds_text(seconds: float) -> str:
    """A duration as "12.3 s" or "4 min 05 s"."""
    return f"{seconds:.1f} s" if seconds < 60 else f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


def headline(summary: dict) -> Headline:
    """The headline of a release or evaluation summary (ReleaseSummary.as_dict())."""
    status, detail = release_status(summary["gate"])
    run = summary["run"]
    published = status == "PUBLISHED" or summary["gate"] is None
    chain = method_chain(summary["steps"]) if summary["gate"] is not None else "evaluation of a masked file"
    seconds = _seconds_text(sum(summary["stage_seconds"].values()))
    facts = [("Records in", str(run["n_records"])),
             ("Records out", f"{run['n_masked']}{'' if published else ' (not published)'}"),
             ("Method chain", chain),
             ("Run time", f"{seconds} ({run['started']} to {run['finished']})")]
    return Headline(status, detail, check_rows(summary["gate"]), key_numbers(summary["metrics"], summary["gate"]),
                    facts, step_warnings(summary["steps"]))


def metrics_headline(metrics: dict, records: str) -> Headline:
    """The headline of a bare evaluation's metrics (the Python API's Metrics): no gate, ``records`` as the only
    fact."""
    status, detail = release_status(None)
    return Headline(status, detail, [], key_numbers(metrics), [("Records", records)])


# ---------------------------------------------------------------- rendering


CHECK_HEADERS = ("Gate check", "Value", "Limit", "Margin", "Result")


def _number_note(number: KeyNumber) -> str:
    """The line under a key number: its unit, direction, gate limit and the original file's value with the
    change ("original 12, +108.3 %")."""
    parts = [number.unit, number.direction]
    if number.limit is not None:
        parts.append(f"limit {format_value(number.limit)}")
    if number.before is not None:
        parts.append(f"original {unit_value_text(number.before, number.unit)}, "
                     f"{change_text(number.change_percent, number.value)}")
    return ", ".join(parts)


def headline_markdown(h: Headline) -> list[str]:
    """The headline as Markdown lines: verdict, gate checks, key numbers, run facts."""
    lines = [f"**{h.status}**: {h.detail}", "", *(line for w in h.warnings for line in (f"**Warning**: {w}", ""))]
    if h.checks:
        lines += ["| " + " | ".join(CHECK_HEADERS) + " |", "|" + "---|" * len(CHECK_HEADERS),
                  *("| " + " | ".join(row) + " |" for row in h.checks), ""]
    if h.numbers:
        lines += ["| Key number | Value | Unit, direction, limit |", "|---|---|---|",
                  *(f"| {n.key} | {unit_value_text(n.value, n.unit)} | {_number_note(n)} |" for n in h.numbers), ""]
    lines += [" · ".join(f"**{label}**: {text}" for label, text in h.facts), ""]
    return lines


def headline_html(h: Headline, link_prefix: str = "#def-") -> str:
    """The headline as an HTML block (class "headline"): verdict banner, gate-check table, key-number cards
    (each key linking to ``link_prefix`` + its anchor; "" for no link) and run facts."""
    parts = ['<section class="headline" id="headline">',
             f'<p class="status status-{html_text(h.status)}"><strong>{html_text(h.status)}</strong>: '
             f'{html_text(h.detail)}</p>',
             *(f'<p class="warning"><strong>Warning</strong>: {html_text(w)}</p>' for w in h.warnings)]
    if h.checks:
        head = "".join(f"<th>{html_text(c)}</th>" for c in CHECK_HEADERS)
        body = "".join(
            f'<tr class="{"pass" if row[-1] == "pass" else "fail"}">' + "".join(f"<td>{html_text(c)}</td>" for c in row)
            + "</tr>" for row in h.checks)
        parts.append(f'<table class="checks"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')
    if h.numbers:
        cards = []
        for n in h.numbers:
            name = html_text(n.key)
            if link_prefix:
                name = f'<a href="{html_text(link_prefix + n.anchor)}">{name}</a>'
            value = html_text(unit_value_text(n.value, n.unit))
            cards.append(f'<div class="card"><div class="key">{name}</div><div class="value">{value}</div>'
                         f'<div class="note">{html_text(_number_note(n))}</div></div>')
        parts.append(f'<div class="cards">{"".join(cards)}</div>')
    facts = "".join(f"<tr><th>{html_text(label)}</th><td>{html_text(text)}</td></tr>" for label, text in h.facts)
    parts += [f'<table class="facts"><tbody>{facts}</tbody></table>', "</section>"]
    return "\n".join(parts)
