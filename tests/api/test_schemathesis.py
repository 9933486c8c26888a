"""Schemathesis against the running service's OpenAPI, with no token and with a viewer's, an
operator's and an admin's: no server error, and every answer conforms to the document (status
codes, content types, schemas, headers, 405s with Allow). Schemathesis's positive-data check is
left out: PromQL expressions, durations and times are strings whose grammar OpenAPI cannot
state, so a schema-valid string may rightly be refused (400, naming the parameter)."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infermeter.settings import Settings
from store.clock import SystemClock
from tests.service import serve

SECRETS = {"viewer": "st-viewer-secret", "operator": "st-operator-secret", "admin": "st-admin-secret"}
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,"
          "response_headers_conformance,unsupported_method")


def _st() -> list[str]:
    found = shutil.which("st", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "schemathesis.cli"]


@pytest.mark.slow
def test_schemathesis_finds_no_server_error_and_no_nonconformance(tmp_path: Path) -> None:
    settings = Settings.model_validate({
        "store": {"url": f"sqlite:///{tmp_path / 'st.db'}"}, "gpu": {"nvml": "off"}, "worker": {"embedded": False},
        # in the config: no fuzzed DELETE /api/v1/tokens/{id} can revoke them mid-run
        "security": {"tokens": [{"name": f"st-{role}", "role": role, "sha256": hashlib.sha256(s.encode()).hexdigest()}
                                for role, s in SECRETS.items()]},
    })
    with serve(settings, SystemClock()) as (base, _):
        for role in (None, "viewer", "operator", "admin"):
            header = ["-H", f"Authorization: Bearer {SECRETS[role]}"] if role else []
            run = subprocess.run(
                [*_st(), "run", f"{base}/openapi.json", *header, "--checks", CHECKS, "--max-examples", "15",
                 "--workers", "2", "--phases", "examples,fuzzing", "--seed", "20261202", "--no-color"],
                capture_output=True, text=True, timeout=600, cwd=tmp_path,
            )
            summary = run.stdout[-3000:]
            assert "Server error" not in run.stdout, f"role {role}:\n{summary}"
            assert run.returncode == 0, f"role {role}:\n{summary}"
            tested = re.search(r"Tested: (\d+)", run.stdout)
            assert tested is not None and int(tested.group(1)) >= 45, summary  # every operation was exercised
