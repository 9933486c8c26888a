"""The cost page's editor: add a price (effective now) and set or remove a budget, for admins.

Changes go through the same code as the API (``Sources.edit_cost``, built by the composition
root): validated against the whole price book, applied at once, written to the audit log with the
signed-in principal. Anyone below admin sees why the change is refused; nothing is changed."""

from __future__ import annotations

from typing import Any

import flask
from dash import Dash, Input, Output, State, dcc, html
from dash import ctx as dash_ctx
from dash.exceptions import PreventUpdate

from access.principal import Role
from dashboard.auth import signed_in
from dashboard.panel import PanelContext

EDITOR_ID = "cost-editor"
RATE_FIELD = {"gpu": "dollars_per_gpu_hour", "electricity": "dollars_per_kwh", "overhead": "dollars_per_node_hour"}
_ROW = {"display": "flex", "gap": "8px", "alignItems": "center", "flexWrap": "wrap", "margin": "6px 0"}
_INPUT = {"width": "150px"}


def _dropdown(id_: str, values: list[str], value: str) -> dcc.Dropdown:
    return dcc.Dropdown(id=id_, options=list(values), value=value, clearable=False,
                        style={"width": "150px"})


def editor_layout() -> html.Details:
    price = html.Div([
        html.B("Add a price (effective now)"),
        _dropdown("edit-price-kind", list(RATE_FIELD), "gpu"),
        dcc.Input(id="edit-gpu-model", placeholder="GPU model, e.g. H100 or *", style=_INPUT),
        _dropdown("edit-purchase-class", ["on_demand", "spot", "reserved"], "on_demand"),
        dcc.Input(id="edit-rate", type="number", min=0, placeholder="$ per unit", style=_INPUT),
        dcc.Input(id="edit-pue", type="number", min=1, placeholder="PUE (electricity)", style=_INPUT),
        html.Button("Add price", id="edit-price-add"),
        html.Span(id="edit-price-result", style={"fontSize": "13px"}),
    ], style=_ROW)
    budget = html.Div([
        html.B("Budget"),
        _dropdown("edit-budget-scope", ["fleet", "model"], "fleet"),
        dcc.Input(id="edit-budget-model", placeholder="model (scope model)", style=_INPUT),
        dcc.Input(id="edit-budget-cpm", type="number", min=0, placeholder="$ per 1M tokens", style=_INPUT),
        dcc.Input(id="edit-budget-spend", type="number", min=0, placeholder="$ per period", style=_INPUT),
        _dropdown("edit-budget-period", ["day", "week", "month"], "month"),
        html.Button("Set budget", id="edit-budget-set"),
        html.Button("Remove budget", id="edit-budget-remove"),
        html.Span(id="edit-budget-result", style={"fontSize": "13px"}),
    ], style=_ROW)
    return html.Details([html.Summary("Change prices and budgets (admins; every change is audited)"), price, budget],
                        id=EDITOR_ID, style={"margin": "8px 16px", "background": "white", "padding": "8px",
                                             "border": "1px solid #ddd"})


def _address() -> str:
    return (flask.request.remote_addr or "unknown") if flask.has_request_context() else "unknown"


def _edit(ctx: PanelContext, action: str, fields: dict[str, Any]) -> str:
    principal = signed_in()
    if ctx.sources.edit_cost is None:
        return "Refused: editing is not available here."
    if principal is None or not principal.may(Role.ADMIN):
        who = f"{principal.name} ({principal.role.label})" if principal is not None else "nobody"
        return f"Refused: changing prices and budgets needs an admin; signed in: {who}."
    try:
        done = ctx.sources.edit_cost(action, fields, principal, _address())
    except ValueError as exc:
        return f"Refused: {exc}"
    return f"Done ({action}): " + ", ".join(f"{k}={v}" for k, v in done.items() if v not in (None, ""))


def register_editor(app: Dash, ctx: PanelContext) -> None:
    def add_price(clicks: int | None, kind: str, gpu_model: str | None, purchase: str, rate: float | None,
                  pue: float | None) -> str:
        if not clicks:
            raise PreventUpdate
        if rate is None:
            return "Refused: give the price."
        fields: dict[str, Any] = {"kind": kind, RATE_FIELD[kind]: rate}
        if kind == "gpu":
            fields.update(gpu_model=gpu_model or "*", purchase_class=purchase)
        if kind == "electricity" and pue is not None:
            fields["pue"] = pue
        return _edit(ctx, "price", fields)

    app.callback(Output("edit-price-result", "children"), Input("edit-price-add", "n_clicks"),
                 State("edit-price-kind", "value"), State("edit-gpu-model", "value"),
                 State("edit-purchase-class", "value"), State("edit-rate", "value"), State("edit-pue", "value"),
                 prevent_initial_call=True)(add_price)

    def budget(set_clicks: int | None, remove_clicks: int | None, scope: str, model: str | None, cpm: float | None,
               spend: float | None, period: str) -> str:
        if not (set_clicks or remove_clicks):
            raise PreventUpdate
        if dash_ctx.triggered_id == "edit-budget-remove":
            return _edit(ctx, "remove_budget", {"scope": scope, "model": model or ""})
        fields = {"scope": scope, "model": model or "", "cost_per_million_tokens": cpm, "spend_per_period": spend,
                  "period": period}
        return _edit(ctx, "budget", {k: v for k, v in fields.items() if v is not None})

    app.callback(Output("edit-budget-result", "children"), Input("edit-budget-set", "n_clicks"),
                 Input("edit-budget-remove", "n_clicks"), State("edit-budget-scope", "value"),
                 State("edit-budget-model", "value"), State("edit-budget-cpm", "value"),
                 State("edit-budget-spend", "value"), State("edit-budget-period", "value"),
                 prevent_initial_call=True)(budget)
