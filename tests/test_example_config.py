"""infermeter.example.yaml is generated from the settings models: it lists every key with its
default, loads to ``Settings()``, and its commented-out examples validate once uncommented."""

from __future__ import annotations

import os
from io import StringIO
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel

from infermeter import example_config
from infermeter.cli import main
from infermeter.config_file import load_settings, parse_config_text
from infermeter.settings import Settings

EXAMPLE = Path(__file__).resolve().parent.parent / "infermeter.example.yaml"


@pytest.fixture(autouse=True)
def _no_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("INFERMETER_"):
            monkeypatch.delenv(name)


def _models_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds (directly or as list/tuple items) and whether it is a list of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = get_origin(annotation)
    for arg in get_args(annotation):
        model, many = _models_in(arg)
        if model is not None:
            return model, many or origin in (list, tuple)
    return None, False


def _type_leaves(model: type[BaseModel], prefix: str = "", stack: tuple[type[BaseModel], ...] = ()) -> set[str]:
    leaves: set[str] = set()
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        sub, many = _models_in(info.annotation)
        if sub is None or sub in stack or sub is model:
            leaves.add(path)
        else:
            leaves |= _type_leaves(sub, path + ("[]." if many else "."), (*stack, model))
    return leaves


def _file_paths(node: Any, path: str, out: set[str]) -> set[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            out.add(here)
            _file_paths(value, here, out)
    elif isinstance(node, list):
        for item in node:
            _file_paths(item, path + "[]", out)
    return out


def _all_models(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    seen.add(model)
    for info in model.model_fields.values():
        sub, _ = _models_in(info.annotation)
        if sub is not None and sub not in seen:
            _all_models(sub, seen)
    return seen


def test_checked_in_file_is_the_generated_one() -> None:
    assert EXAMPLE.read_text(encoding="utf-8") == example_config.generate(), (
        f"{EXAMPLE.name} is out of date; regenerate it with: {example_config.REGENERATE}"
    )
    assert example_config.main(["--check", "--path", str(EXAMPLE)]) == 0


def test_check_flag_fails_on_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "example.yaml"
    stale.write_text("server: {}\n")
    assert example_config.main(["--check", "--path", str(stale)]) == 1
    assert example_config.REGENERATE in capsys.readouterr().err
    assert example_config.main(["--write", "--path", str(stale)]) == 0
    assert stale.read_text() == example_config.generate()


def test_the_file_loads_to_exactly_the_defaults() -> None:
    settings, _ = load_settings(str(EXAMPLE))
    assert settings.model_dump() == Settings().model_dump()
    assert settings == Settings()


def test_every_key_path_of_settings_is_in_the_file() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    with_examples = _file_paths(yaml.safe_load(example_config.uncomment_examples(text)), "", set())
    missing = sorted(_type_leaves(Settings) - with_examples)
    assert not missing, f"keys not in {EXAMPLE.name}: {missing}"
    # Without the examples, only the keys of entries in lists that are empty by default, and of
    # sections that are off (null) by default, are absent.
    plain = _file_paths(yaml.safe_load(text), "", set())
    for leaf in _type_leaves(Settings) - plain:
        assert "[]" in leaf or leaf.startswith("security.oidc."), leaf
    for section in Settings.model_fields:
        assert f"\n{section}:\n" in text


def test_every_settings_field_has_a_description() -> None:
    undescribed = [
        f"{model.__module__}.{model.__name__}.{name}"
        for model in _all_models(Settings, set())
        for name, info in model.model_fields.items()
        if not info.description
    ]
    assert not undescribed, f"add Field(description=...) to: {undescribed}"


def test_examples_are_marked_and_never_loaded_as_defaults() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    lines = text.splitlines()
    marks = [i for i, line in enumerate(lines) if line.strip() == example_config.EXAMPLE_MARK]
    for key in ("targets", "paths", "rule_files", "nodes", "budgets", "gpu_prices", "routes", "webhook_configs"):
        assert any(lines[i + 1].lstrip().startswith(f"# {key}:") for i in marks), key
    data = yaml.safe_load(text)
    assert data["cost"]["budgets"] == [] and data["scrape"]["targets"] == []
    assert data["cost"]["gpu_prices"] == [
        {"gpu_model": "*", "dollars_per_gpu_hour": 2.0, "effective_from": "1970-01-01T00:00:00Z", "purchase_class": "on_demand"}
    ]
    assert "H100" not in "\n".join(line for line in lines if not line.lstrip().startswith("#"))


def test_check_config_accepts_the_file_and_its_uncommented_examples(tmp_path: Path) -> None:
    out, err = StringIO(), StringIO()
    assert main(["check-config", str(EXAMPLE)], out, err) == 0, err.getvalue()
    assert out.getvalue().strip() == f"{EXAMPLE}: OK"
    uncommented = tmp_path / "with-examples.yaml"
    uncommented.write_text(example_config.uncomment_examples(EXAMPLE.read_text(encoding="utf-8")))
    out, err = StringIO(), StringIO()
    assert main(["check-config", str(uncommented)], out, err) == 0, err.getvalue()
    settings = parse_config_text(uncommented.read_text(), str(uncommented), environ={})
    assert [t.job for t in settings.scrape.targets] == ["vllm", "dcgm", "triton", "tgi", "sglang"]
    assert settings.scrape.targets[1].authorization is not None and settings.security.oidc is not None
    assert settings.security.tokens[0].role == "viewer"
    assert settings.scrape.targets[0].interval == 5_000
    assert len(settings.cost.budgets) == 2 and len(settings.cost.gpu_prices) == 4
    assert settings.notify.receivers[0].webhook_configs[0].secret is not None
    assert settings.notify.route.routes[0].group_wait == 10_000
    assert settings.alerts.rule_files == ["rules/extra.yml"]


def test_new_fields_are_picked_up_and_get_examples() -> None:
    """A section added later appears with its keys; its empty lists get a made-up example."""

    class Entry(BaseModel):
        name: str
        weight: int = 1

    class Extra(BaseModel):
        enabled: bool = True
        entries: list[Entry] = []

    class Root(BaseModel):
        extra: Extra = Extra()

    lines = example_config._field_lines("extra", Extra(), Root.model_fields["extra"], 0, "extra", True, True)
    text = example_config.uncomment_examples("\n".join(lines))
    assert yaml.safe_load(text) == {"extra": {"enabled": True, "entries": [{"name": "example", "weight": 1}]}}

