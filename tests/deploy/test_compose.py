"""docker-compose.yml against the Compose Specification's JSON schema (vendored from the
compose-spec project, Apache-2.0: deploy/compose-spec.schema.json), plus what the schema cannot
see: the services are wired to each other, every file they mount exists, the configs they mount
are valid for their programs, and the image holds every package of the project."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from infermeter.config_file import load_settings
from worker.config import load_worker_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "deploy" / "compose-spec.schema.json"


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return data


def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator: jsonschema.protocols.Validator = cls(schema)
    return validator


def test_the_vendored_schema_is_the_compose_spec() -> None:
    schema = json.loads(SCHEMA.read_text())
    assert schema["title"] == "Compose Specification" and schema["$id"] == "compose_spec.json"
    assert (REPO / "deploy" / "compose-spec.LICENSE").read_text().lstrip().startswith("Apache License")


def test_compose_file_is_valid() -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator().iter_errors(_compose())]
    assert not errors, "\n".join(errors)


def test_the_schema_rejects_what_compose_would() -> None:
    """The validation has teeth: a misspelt key and a bad port are caught."""
    validator = _validator()
    for broken in ({"services": {"a": {"image": "x", "prots": ["80:80"]}}},
                   {"services": {"a": {"image": "x", "depends_on": {"b": {"condition": "when_ready"}}}}},
                   {"services": {"a": {"image": "x", "healthcheck": {"test": ["CMD"], "interval": 5}}}}):
        assert list(validator.iter_errors(broken)), broken


def test_services_are_wired() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "infermeter", "worker", "prometheus", "alertmanager", "grafana",
                             "agent", "victoriametrics", "infermeter-fleet", "infermeter-ha-a", "infermeter-ha-b"}
    fleet = {n for n, svc in services.items() if "fleet" in svc.get("profiles", [])}
    assert fleet == {"agent", "victoriametrics", "infermeter-fleet"}
    pair = {n for n, svc in services.items() if "ha" in svc.get("profiles", [])}
    assert pair == {"victoriametrics", "infermeter-ha-a", "infermeter-ha-b"}
    app, worker = services["infermeter"], services["worker"]
    assert app["image"] == worker["image"] and app["build"] == worker["build"]  # one image, built once
    assert app["command"][:2] == ["infermeter", "up"]
    assert worker["command"][-5:] == ["worker", "--host", "0.0.0.0", "--port", "8080"]
    store_url = app["environment"]["INFERMETER_STORE_URL"]
    pg = services["postgres"]["environment"]
    assert store_url == (f"postgresql+psycopg://{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}"
                         f"@postgres:5432/{pg['POSTGRES_DB']}")
    assert app["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name, service in services.items():
        for dep in service.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown {dep}"
    published = [p.split(":")[0] for s in services.values() for p in s.get("ports", [])]
    assert len(published) == len(set(published)), published
    assert {"8000", "8080", "9090", "9093", "3000", "9109", "8428", "8001"} <= set(published)
    # Prometheus reaches the services by the names its config uses.
    prom = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    targets = {t for job in prom["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    targets |= {t for am in prom["alerting"]["alertmanagers"] for sc in am["static_configs"] for t in sc["targets"]}
    assert targets == {"infermeter:8000", "worker:8080", "alertmanager:9093"}
    for target in targets:
        assert target.split(":")[0] in services


def _mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        out.append((source, target))
    return out


def test_every_mounted_file_exists_and_lands_where_its_program_reads() -> None:
    compose = _compose()
    named = set(compose["volumes"])
    mounts = {name: dict((t, s) for s, t in _mounts(svc)) for name, svc in compose["services"].items()}
    for name, by_target in mounts.items():
        for source in by_target.values():
            if source.startswith("./"):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in named, f"{name} mounts undeclared volume {source}"
    prom = mounts["prometheus"]
    config_dir = Path("/etc/prometheus")
    assert prom[str(config_dir / "prometheus.yml")] == "./deploy/prometheus.yml"
    rules = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())["rule_files"]
    for rule_file in rules:  # relative to the config file, inside the container
        inside = config_dir / rule_file
        mounted = [(t, s) for t, s in prom.items() if str(inside).startswith(t + "/")]
        assert mounted, f"{inside} is not mounted"
        target, source = mounted[0]
        assert (REPO / source / str(inside)[len(target) + 1:]).exists()
    graf = mounts["grafana"]
    provider = yaml.safe_load((REPO / "deploy/grafana/provisioning/dashboards/infermeter.yml").read_text())
    assert graf[provider["providers"][0]["options"]["path"]] == "./deploy/grafana/dashboards"
    assert graf["/etc/grafana/provisioning"] == "./deploy/grafana/provisioning"
    home = compose["services"]["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (REPO / "deploy/grafana/dashboards" / Path(home).name).exists()
    assert mounts["alertmanager"]["/etc/alertmanager/alertmanager.yml"] == "./deploy/alertmanager.yml"
    app_env = compose["services"]["infermeter"]["environment"]
    assert mounts["infermeter"][app_env["INFERMETER_CONFIG"]] == "./deploy/infermeter.yaml"
    worker_cmd = compose["services"]["worker"]["command"]
    assert mounts["worker"][worker_cmd[worker_cmd.index("--config") + 1]] == "./deploy/worker.yaml"


def test_the_fleet_agent_ships_to_services_of_the_stack() -> None:
    services = _compose()["services"]
    agent = services["agent"]
    config = agent["command"][agent["command"].index("--config") + 1]
    assert dict((t, s) for s, t in _mounts(agent))[config] == "./deploy/agent.yaml"
    settings, _ = load_settings(str(REPO / "deploy" / "agent.yaml"))
    receivers = [rw.url for rw in settings.agent.remote_write]
    assert receivers == ["http://victoriametrics:8428/api/v1/write"]
    for url in receivers + [u for t in settings.scrape.targets for u in t.urls]:
        assert url.split("//")[1].split(":")[0] in services
    assert settings.agent.queue_dir.startswith("/var/lib/infermeter-agent")  # on the agent-queue volume
    assert "9109:9109" in agent["ports"] and settings.agent.port == 9109


def test_the_fleet_up_reads_and_writes_the_engine_and_keeps_state_in_its_own_database() -> None:
    services = _compose()["services"]
    fleet = services["infermeter-fleet"]
    config = fleet["environment"]["INFERMETER_CONFIG"]
    assert dict((t, s) for s, t in _mounts(fleet))[config] == "./deploy/infermeter-fleet.yaml"
    settings, _ = load_settings(str(REPO / "deploy" / "infermeter-fleet.yaml"))
    assert settings.store.backend == "remote"
    assert settings.store.remote.write_url == "http://victoriametrics:8428/api/v1/write"
    assert settings.store.remote.query_url == "http://victoriametrics:8428"
    assert settings.store.remote.queue_dir.startswith("/var/lib/infermeter")  # on the fleet-queue volume
    assert dict((t, s) for s, t in _mounts(fleet))["/var/lib/infermeter"] == "fleet-queue"
    assert settings.server.port == 8001 and "8001:8001" in fleet["ports"]
    database = fleet["environment"]["INFERMETER_STORE_URL"].rsplit("/", 1)[1]
    init = dict((t, s) for s, t in _mounts(services["postgres"]))
    script = (REPO / init["/docker-entrypoint-initdb.d/init-fleet.sql"]).read_text()
    assert f"CREATE DATABASE {database} " in script and database != services["postgres"]["environment"]["POSTGRES_DB"]


def test_the_ha_pair_shares_one_database_and_the_engine_and_each_keeps_its_own_queue() -> None:
    services = _compose()["services"]
    a, b = services["infermeter-ha-a"], services["infermeter-ha-b"]
    mounts_a, mounts_b = dict((t, s) for s, t in _mounts(a)), dict((t, s) for s, t in _mounts(b))
    config = a["environment"]["INFERMETER_CONFIG"]
    assert mounts_a[config] == mounts_b[config] == "./deploy/infermeter-ha.yaml"
    settings, _ = load_settings(str(REPO / "deploy" / "infermeter-ha.yaml"))
    assert settings.ha.enabled and settings.store.backend == "remote"
    assert a["environment"]["INFERMETER_STORE_URL"] == b["environment"]["INFERMETER_STORE_URL"] == settings.store.url
    assert settings.ha.lease_duration * 5 / 4 <= 2 * settings.alerts.evaluation_interval
    assert mounts_a["/var/lib/infermeter"] != mounts_b["/var/lib/infermeter"]  # one remote-write queue each
    assert a["command"][-1] == "8002" and "8002:8002" in a["ports"]
    assert b["command"][-1] == "8003" and "8003:8003" in b["ports"]
    database = settings.store.url.rsplit("/", 1)[1]
    init = dict((t, s) for s, t in _mounts(services["postgres"]))
    assert f"CREATE DATABASE {database} " in (REPO / init["/docker-entrypoint-initdb.d/init-fleet.sql"]).read_text()


def test_mounted_configs_are_valid_for_their_programs() -> None:
    settings, _ = load_settings(str(REPO / "deploy" / "infermeter.yaml"))
    assert settings.server.host == "0.0.0.0"
    assert [t.urls for t in settings.scrape.targets] == [["http://worker:8080/metrics"]]
    worker = load_worker_config(REPO / "deploy" / "worker.yaml")
    assert (worker.host, worker.port, worker.embedded) == ("0.0.0.0", 8080, False)
    models = dict((t, s) for s, t in _mounts(_compose()["services"]["worker"]))
    assert models[worker.model_dir] == "models"  # generated weights survive a restart


def test_the_image_holds_every_package() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\S+) \1$", dockerfile, re.M))
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages <= copied, packages - copied
    extras = set(project["project"].get("optional-dependencies", {}))
    wanted = set(_compose()["x-infermeter-image"]["build"]["args"]["EXTRAS"].split(","))
    assert wanted <= extras, wanted - extras  # pip would only warn about an unknown extra


@pytest.mark.parametrize("path", ["deploy/prometheus.yml", "deploy/alertmanager.yml", "deploy/infermeter.yaml",
                                  "deploy/infermeter-fleet.yaml", "deploy/infermeter-ha.yaml",
                                  "deploy/worker.yaml", "deploy/grafana/provisioning/datasources/prometheus.yml",
                                  "deploy/grafana/provisioning/dashboards/infermeter.yml"])
def test_yaml_files_parse(path: str) -> None:
    assert isinstance(yaml.safe_load((REPO / path).read_text()), dict)


@pytest.mark.parametrize(("unit", "command"), [("infermeter-agent.service", "agent"), ("infermeter-ha.service", "up")])
def test_systemd_units_run_a_command_of_the_cli(unit: str, command: str) -> None:
    import configparser
    import shlex

    from infermeter.cli import build_parser

    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((REPO / "deploy" / unit).read_text())
    argv = shlex.split(parser["Service"]["ExecStart"])
    assert argv[0].endswith("/infermeter") and argv[-1] == command
    args = build_parser().parse_args(argv[1:])  # the CLI takes it as written
    assert args.config == "/etc/infermeter/infermeter.yaml"
    assert parser["Service"]["Restart"] == "always"
