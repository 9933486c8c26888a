"""Calling the dashboard's callbacks over HTTP as the browser does (``/_dash-update-component``),
from the app's own ``/_dash-dependencies`` (for tests and the benchmark)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dashboard.figures.common import points_per_trace, state_of


@dataclass(frozen=True)
class Call:
    name: str  # the output(s), e.g. "gpu-heatmap.figure"
    body: dict[str, Any]
    outputs: tuple[tuple[str, str], ...]


def _split(output: str) -> tuple[tuple[str, str], ...]:
    parts = output.strip(".").split("...") if output.startswith("..") else [output]
    return tuple((p.rsplit(".", 1)[0], p.rsplit(".", 1)[1]) for p in parts)


def calls(dependencies: list[dict[str, Any]], values: Mapping[str, Any], skip_prefixes: tuple[str, ...] = ("_pages",)) -> Iterator[Call]:
    """One request body per callback; inputs take ``values[id]`` (None when absent)."""
    for dep in dependencies:
        outputs = _split(dep["output"])
        if any(o[0].startswith(skip_prefixes) for o in outputs) or any(i["id"].startswith(skip_prefixes) for i in dep["inputs"]):
            continue
        body: dict[str, Any] = {
            "output": dep["output"],
            "outputs": [{"id": i, "property": p} for i, p in outputs] if len(outputs) > 1
            else {"id": outputs[0][0], "property": outputs[0][1]},
            "inputs": [{"id": i["id"], "property": i["property"], "value": values.get(i["id"])} for i in dep["inputs"]],
            "changedPropIds": [],
            "state": [{"id": i["id"], "property": i["property"], "value": values.get(i["id"])}
                      for i in dep.get("state", [])],
        }
        yield Call(dep["output"].strip("."), body, outputs)


def results(call: Call, reply: Mapping[str, Any]) -> dict[str, Any]:
    """``{"id.property": value}`` from a callback's JSON reply."""
    response = reply["response"]
    return {f"{i}.{p}": response[i][p] for i, p in call.outputs if i in response}


def figure_facts(value: Any) -> tuple[str, int, str]:
    """(state, most points in a trace, message) of a figure value."""
    if not isinstance(value, dict) or "layout" not in value:
        return "table", 0, ""
    return state_of(value), points_per_trace(value), str(value["layout"].get("meta", {}).get("message", ""))


__all__ = ["Call", "calls", "results", "figure_facts"]
