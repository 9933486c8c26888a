"""deploy/kubernetes/infermeter-agent.yaml: the DaemonSet example runs the agent with the
ConfigMap's config, which is a valid agent config, and keeps the durable queue on the node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from infermeter.config_file import load_settings

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "deploy" / "kubernetes" / "infermeter-agent.yaml"


def _docs() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text())}


def test_the_configmap_holds_a_valid_agent_config(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(_docs()["ConfigMap"]["data"]["agent.yaml"])
    settings, _ = load_settings(str(config))
    assert settings.agent.remote_write and settings.agent.remote_write[0].url.endswith("/api/v1/write")
    assert settings.agent.port == 9109 and settings.agent.host == "0.0.0.0"
    assert settings.agent.queue_dir.startswith("/var/lib/infermeter-agent/")


def test_the_daemonset_runs_the_agent_on_the_config_with_its_queue_on_the_node() -> None:
    docs = _docs()
    spec = docs["DaemonSet"]["spec"]["template"]["spec"]
    assert docs["DaemonSet"]["spec"]["selector"]["matchLabels"] == docs["DaemonSet"]["spec"]["template"]["metadata"]["labels"]
    assert spec["hostNetwork"] is True  # the node's engines on 127.0.0.1, the node's hostname as `node`
    container = spec["containers"][0]
    command = container["command"]
    assert command[:1] == ["infermeter"] and command[-1] == "agent"
    config_path = Path(command[command.index("--config") + 1])
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert mounts["config"] == str(config_path.parent)
    assert volumes["config"]["configMap"]["name"] == docs["ConfigMap"]["metadata"]["name"]
    assert config_path.name in docs["ConfigMap"]["data"]
    assert volumes["queue"]["hostPath"]["path"] and mounts["queue"] == "/var/lib/infermeter-agent"
    probe = container["readinessProbe"]["httpGet"]
    assert (probe["path"], probe["port"]) == ("/health", 9109)
