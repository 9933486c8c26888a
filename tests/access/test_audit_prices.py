"""Prices and budgets edited through the API take effect at once and survive a restart; every
change of a price, budget, silence, token, rule file or threshold lands in the append-only audit
log with who, when, from where, before and after; a silence's author is the token's identity."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from access.principal import Role
from infermeter.runtime import build_runtime
from infermeter.settings import GpuSettings, ServerSettings, Settings, StoreSettings
from store.clock import ManualClock
from store.engine import create_store_engine
from tests.service import serve

T0 = 1_764_000_000_000
ADMIN = {"authorization": "Bearer admin-secret"}


def _settings(url: str) -> Settings:
    return Settings(server=ServerSettings(api_token="admin-secret"), store=StoreSettings(url=url),
                    gpu=GpuSettings(nvml="off"))


def test_prices_and_budgets_change_through_the_api(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    clock = ManualClock(T0)
    with serve(_settings(url), clock) as (base, runtime):
        _, op_secret = runtime.access.tokens.create("oncall", Role.OPERATOR, "test")
        operator = {"authorization": f"Bearer {op_secret}"}
        h100 = {"kind": "gpu", "gpu_model": "H100", "dollars_per_gpu_hour": 4.25}
        assert httpx.post(f"{base}/api/v1/prices", json=h100, headers=operator).status_code == 403
        made = httpx.post(f"{base}/api/v1/prices", json=h100, headers=ADMIN)
        assert made.status_code == 201 and made.json()["data"]["effective_from"].startswith("2025-11-24T16:00")
        book = runtime.alerting.book  # type: ignore[union-attr]
        assert book.gpu_price("NVIDIA H100 80GB HBM3", "on_demand", T0) == 4.25  # in effect now
        assert book.gpu_price("NVIDIA H100 80GB HBM3", "on_demand", T0 - 1) == 2.0  # history keeps its price
        prices = httpx.get(f"{base}/api/v1/prices").json()["data"]["gpu_prices"]
        assert [p["dollars_per_gpu_hour"] for p in prices] == [2.0, 4.25]
        for bad in ({**h100, "dollars_per_gpu_hour": -1}, {**h100, "kind": "water"},
                    {"kind": "gpu", "dollars_per_gpu_hour": 1.0}, {"kind": "electricity", "pue": 0.5, "dollars_per_kwh": 1},
                    {**h100, "purchase_class": "stolen"}):
            answer = httpx.post(f"{base}/api/v1/prices", json=bad, headers=ADMIN)
            assert answer.status_code == 422, (bad, answer.text)
        budget = {"scope": "model", "model": "llama-8b", "cost_per_million_tokens": 0.5}
        assert httpx.put(f"{base}/api/v1/budgets", json=budget, headers=ADMIN).status_code == 200
        assert httpx.put(f"{base}/api/v1/budgets", json={**budget, "cost_per_million_tokens": 0.75},
                         headers=ADMIN).status_code == 200
        listed = httpx.get(f"{base}/api/v1/budgets").json()["data"]
        assert [(b["model"], b["cost_per_million_tokens"]) for b in listed] == [("llama-8b", 0.75)]
        forecasting = runtime.alerting.forecasting  # type: ignore[union-attr]
        assert forecasting is not None and [b.model for b in forecasting.budgets] == ["llama-8b"]
        assert httpx.put(f"{base}/api/v1/budgets", json={"scope": "model"}, headers=ADMIN).status_code == 422
        audit = httpx.get(f"{base}/api/v1/audit", headers=ADMIN).json()["data"]
        assert [e["action"] for e in audit] == ["budget.set", "budget.set", "price.set"]
        assert audit[0]["before"]["cost_per_million_tokens"] == 0.5 and audit[0]["after"]["cost_per_million_tokens"] == 0.75
        assert audit[2]["object"] == "prices/gpu" and len(audit[2]["after"]) == len(audit[2]["before"]) + 1
        assert audit[2]["actor"] == "api_token" and audit[2]["role"] == "admin" and audit[2]["address"] == "127.0.0.1"
        report = httpx.get(f"{base}/api/v1/report", params={"format": "csv"}).text
        listed_changes = [line.split(",")[3] for line in report.splitlines() if ",changes," in line and ",actor," in line]
        assert [key.split()[1] for key in listed_changes] == ["price.set", "budget.set", "budget.set"]
    # a restart on the same database prices with the changed book
    again = build_runtime(_settings(url), ManualClock(T0 + 60_000))
    assert again.alerting is not None and again.alerting.book.gpu_price("H100", "on_demand", T0 + 1) == 4.25
    assert [b.model for b in again.settings.cost.budgets] == ["llama-8b"]
    with serve(_settings(url), ManualClock(T0 + 60_000)) as (base, _):
        gone = httpx.delete(f"{base}/api/v1/budgets", params={"scope": "model", "model": "llama-8b"}, headers=ADMIN)
        assert gone.status_code == 200 and httpx.get(f"{base}/api/v1/budgets").json()["data"] == []
        assert httpx.delete(f"{base}/api/v1/budgets", params={"scope": "model", "model": "llama-8b"},
                            headers=ADMIN).status_code == 404


def test_silence_author_is_the_token_identity_and_changes_are_audited(tmp_path: Path) -> None:
    with serve(_settings(f"sqlite:///{tmp_path / 's.db'}"), ManualClock(T0)) as (base, runtime):
        _, secret = runtime.access.tokens.create("oncall-anna", Role.OPERATOR, "test")
        operator = {"authorization": f"Bearer {secret}"}
        body = {"matchers": [{"name": "alertname", "value": "GpuHot", "isRegex": False}],
                "endsAt": "2030-01-01T00:00:00Z", "createdBy": "the CEO", "comment": "fan swap"}
        silence_id = httpx.post(f"{base}/api/v1/silences", json=body, headers=operator).json()["silenceID"]
        assert httpx.get(f"{base}/api/v1/silence/{silence_id}").json()["createdBy"] == "oncall-anna"
        assert httpx.delete(f"{base}/api/v1/silence/{silence_id}", headers=operator).status_code == 200
        audit = httpx.get(f"{base}/api/v1/audit", headers=ADMIN, params={"action": "silence.create"}).json()["data"]
        assert len(audit) == 1 and audit[0]["actor"] == "oncall-anna" and audit[0]["role"] == "operator"
        assert audit[0]["before"] is None and audit[0]["after"]["comment"] == "fan swap"
        expired = httpx.get(f"{base}/api/v1/audit", headers=ADMIN, params={"action": "silence.expire"}).json()["data"]
        assert expired[0]["before"]["status"]["state"] == "active" and expired[0]["after"]["status"]["state"] == "expired"


def test_a_reload_audits_thresholds_and_rule_files(tmp_path: Path) -> None:
    rules = tmp_path / "team.yml"
    rules.write_text("groups:\n  - name: t\n    rules:\n      - alert: A\n        expr: up == 0\n")
    config = tmp_path / "infermeter.yaml"
    text = (f"store:\n  url: sqlite:///{tmp_path / 'r.db'}\ngpu:\n  nvml: 'off'\nworker:\n  embedded: false\n"
            f"alerts:\n  rule_files: [{rules}]\n  thresholds:\n    gpu_temperature_celsius: 85\n")
    config.write_text(text)
    settings = Settings.model_validate({"server": {"api_token": "admin-secret"},
                                        "store": {"url": f"sqlite:///{tmp_path / 'r.db'}"}, "gpu": {"nvml": "off"},
                                        "alerts": {"rule_files": [str(rules)],
                                                   "thresholds": {"gpu_temperature_celsius": 85}}})
    with serve(settings, ManualClock(T0), config_path=str(config)) as (base, _):
        config.write_text(text.replace("85", "80") + "server:\n  api_token: admin-secret\n")
        rules.write_text(rules.read_text().replace("up == 0", "up == 0 or absent(up)"))
        assert httpx.post(f"{base}/-/reload", headers=ADMIN).status_code == 200
        audit = httpx.get(f"{base}/api/v1/audit", headers=ADMIN, params={"action": "config.reload"}).json()["data"]
        by_object = {e["object"]: e for e in audit}
        assert by_object["alerts.thresholds"]["before"]["gpu_temperature_celsius"] == 85
        assert by_object["alerts.thresholds"]["after"]["gpu_temperature_celsius"] == 80
        assert by_object["alerts.thresholds"]["actor"] == "api_token"
        before, after = by_object["rule_files"]["before"], by_object["rule_files"]["after"]
        assert list(before) == [str(rules)] and before[str(rules)] != after[str(rules)]


@pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
def test_the_database_keeps_the_audit_log_append_only(store_url: str) -> None:
    engine = create_store_engine(store_url)
    runtime = build_runtime(_settings(store_url), ManualClock(T0), migrate=False)
    from access.audit import SYSTEM, Actor

    runtime.access.audit.record(Actor(SYSTEM, "test"), "price.set", "prices/gpu", [1], [2])
    for statement in ("UPDATE audit_log SET actor = 'mallory'", "DELETE FROM audit_log"):
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(sa.text(statement))
    assert runtime.access.audit.entries()[0]["actor"] == "system"
    engine.dispose()
