"""The base package and `agent_recovery.integrations` import no framework
(each adapter module imports its own framework when imported itself)."""

from __future__ import annotations

import json
import subprocess
import sys

FRAMEWORKS = ("pydantic_ai", "agents", "langgraph", "langchain_core", "llama_index", "google")


def test_importing_the_package_and_the_integrations_imports_no_framework() -> None:
    code = (
        "import json, sys, agent_recovery, agent_recovery.integrations; from agent_recovery import recover, Runtime; "
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(FRAMEWORKS)!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_an_adapter_module_imports_its_framework() -> None:
    code = ("import json, sys, agent_recovery.integrations.langgraph; "
            "print(json.dumps('langgraph' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) is True
