"""The Python policy template (examples/policy-python/) through the real hosts.

The template is built once per session with its own build script
(componentize-py, then wasm-tools compose with the reference component), and
then loaded by the CLI, the Rust host's conformance driver, the Python
package and the Node package. Its one rule (an HTTP 409 on a tool call is
permanent: `fail`) must show in every host; every other answer must be the
reference's, byte for byte, over the shared vectors and generated
observations (tests/conformance/generate.py). Loading it through each host's
validated swap runs its smoke set.

Needs on PATH: componentize-py and wasm-tools (scripts/test-all.sh installs
them into .venv-policy-python), node. Needs built: the reference component,
target/release/agent-recovery and target/release/examples/conformance
(scripts/test-all.sh builds them first; CARGO_TARGET_DIR is honoured).
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from agent_recovery import Policy, PolicyHandle

ROOT = pathlib.Path(__file__).resolve().parents[2]
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
REFERENCE = TARGET / "wasm32-wasip2" / "release" / "agent_recovery_policy.wasm"
CLI = TARGET / "release" / "agent-recovery"
RUST_DRIVER = TARGET / "release" / "examples" / "conformance"
NODE_DRIVER = ROOT / "node" / "scripts" / "conformance.mjs"
NODE_FLAG = "--experimental-wasm-extended-const"

sys.path.insert(0, str(ROOT / "tests" / "conformance"))
import generate  # noqa: E402

# The rule, as examples/policy-python/policy.py documents it.
CONFLICT = "tool.http.409_conflict"
HINT = (
    "Do not retry: the tool says this was already done or conflicts with its "
    "current state; check that state before any new attempt."
)
CONFLICT_OBS = {"source": "http", "status": 409}


@pytest.fixture(scope="session", autouse=True)
def rust_cache(tmp_path_factory):
    """One compile cache of this session for the CLI and the Rust driver, so the
    Rust host compiles the template once (and nothing from the user's cache is used)."""
    cache = tmp_path_factory.mktemp("rust-cache")
    cache.chmod(0o700)
    previous = os.environ.get("AGENT_RECOVERY_CACHE_DIR")
    os.environ["AGENT_RECOVERY_CACHE_DIR"] = str(cache)
    yield cache
    if previous is None:
        del os.environ["AGENT_RECOVERY_CACHE_DIR"]
    else:
        os.environ["AGENT_RECOVERY_CACHE_DIR"] = previous


@pytest.fixture(scope="session")
def template(tmp_path_factory):
    """Build the template once: the path of the composed component."""
    for tool in ("componentize-py", "wasm-tools", "node"):
        assert shutil.which(tool), f"{tool} is not on PATH (scripts/test-all.sh installs it)"
    out = tmp_path_factory.mktemp("policy-python")
    proc = subprocess.run(
        ["bash", str(ROOT / "examples" / "policy-python" / "build.sh"), str(out), str(REFERENCE)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    wasm = out / "policy_python.wasm"
    assert proc.stdout.strip().splitlines()[-1] == str(wasm)
    return wasm


def wit_of(wasm):
    proc = subprocess.run(["wasm-tools", "component", "wit", str(wasm)], capture_output=True, text=True, check=True)
    lines = [line.strip().rstrip(";") for line in proc.stdout.splitlines()]
    imports = sorted(line.split()[1] for line in lines if line.startswith("import "))
    exports = sorted(line.split()[1] for line in lines if line.startswith("export ") and line.split()[1] != "exports:")
    return imports, exports


POLICY_WORLD = sorted(
    f"agent:recovery/{name}@0.1.0"
    for name in ["types", "observation", "classify", "backoff", "decide", "registry", "idempotency", "render", "meta"]
)


def test_the_component_exports_the_world_and_imports_only_what_a_host_grants(template):
    imports, exports = wit_of(template)
    assert exports == POLICY_WORLD
    granted = ("wasi:cli/", "wasi:io/", "wasi:clocks/", "wasi:random/")
    assert imports and all(name.startswith(granted) for name in imports), imports
    # Before composition the Python part imports the reference and no WASI at all (--stub-wasi).
    app_imports, app_exports = wit_of(template.with_name("policy_python.app.wasm"))
    assert app_exports == POLICY_WORLD
    assert app_imports == POLICY_WORLD


def cli(*args, stdin=None):
    proc = subprocess.run([str(CLI), *args], input=stdin, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def cli_decide(policy, call, observation=CONFLICT_OBS):
    args = ["--policy", str(policy)] if policy else []
    out = cli(*args, "--json", "decide", "-", "--call", call, "--attempt", "1", "--seed", "7", stdin=json.dumps(observation))
    return json.loads(out)


def test_cli_a_tool_409_fails_and_an_llm_409_is_the_reference(template):
    tool = cli_decide(template, "tool")
    assert tool["action"] == "fail"
    assert tool["reason"] == "permanent"
    assert tool["envelope"]["code"] == CONFLICT
    assert tool["envelope"]["class"] == "permanent"
    assert tool["envelope"]["retryable"] is False
    assert tool["envelope"]["hint"] == HINT
    # The reference restores a checkpoint on a conflict; the template keeps that for LLM calls.
    reference_tool = cli_decide(None, "tool")
    assert reference_tool["action"] == "restore"
    assert cli_decide(template, "llm") == cli_decide(None, "llm")
    assert cli_decide(template, "llm")["action"] == "restore"


def test_cli_check_runs_the_templates_smoke_set(template):
    report = json.loads(cli("check", str(template)))
    assert report["name"] == "python-template"
    assert report["contract"] == "0.1.0"
    reference_cases = len(json.loads(Policy.load().smoke_tests_json()))
    assert report["smoke_tests"] == reference_cases + 2


def operations():
    """Every vector plus generated observations, keys, backoffs and renders."""
    ops = list(generate.ops(300, 20261122))
    envelope = json.dumps({"source": "http", "status": 503})
    classified = Policy.load().classify_json(envelope)
    for fmt in ["jsonrpc-error", "mcp-tool-result", "a2a-task-status", "problem-json", "model-tool-result",
                "coordinator-text"]:
        ops.append({"op": "render", "envelope": classified, "format": fmt, "options": json.dumps({"id": 1})})
    return ops


def run_driver(cmd, ops):
    data = "".join(json.dumps(op) + "\n" for op in ops).encode()
    proc = subprocess.run(cmd, input=data, capture_output=True, cwd=ROOT, timeout=1800)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    lines = proc.stdout.decode().split("\n")
    assert lines[-1] == ""
    assert len(lines) - 1 == len(ops)
    return lines[:-1]


def expected_from(reference_line):
    """What the template must print, given the reference's line: the same bytes,
    or for a tool 409 the reference's JSON with the rule applied."""
    try:
        value = json.loads(reference_line)
    except ValueError:
        return reference_line, False
    if not isinstance(value, dict):
        return reference_line, False
    envelope = value.get("envelope", value)
    if not isinstance(envelope, dict) or envelope.get("code") != CONFLICT:
        return reference_line, False
    envelope.update({"class": "permanent", "retryable": False, "hint": HINT, "retry_after_ms": None})
    if "action" in value:
        value.update({"action": "fail", "delay_ms": None, "reason": "permanent", "reason_code": None})
    return value, True


@pytest.fixture(scope="module")
def reference_lines():
    ops = operations()
    return ops, run_driver([str(RUST_DRIVER)], ops)


@pytest.mark.parametrize("host", ["rust", "python", "node"])
def test_every_other_answer_is_the_references_byte_for_byte(template, reference_lines, host):
    ops, reference = reference_lines
    cmd = {
        "rust": [str(RUST_DRIVER), "--component", str(template)],
        "python": [sys.executable, "-m", "agent_recovery.conformance", "--component", str(template)],
        "node": ["node", NODE_FLAG, str(NODE_DRIVER), "--component", str(template)],
    }[host]
    got = run_driver(cmd, ops)
    overridden = 0
    for op, ref, line in zip(ops, reference, got, strict=True):
        expected, changed = expected_from(ref)
        if not changed:
            assert line == expected, f"{host}: {json.dumps(op)[:300]}\nexpected {expected[:300]}\ngot      {line[:300]}"
            continue
        overridden += 1
        value = json.loads(line)
        assert value == expected, f"{host}: {json.dumps(op)[:300]}"
        assert list(value) == list(expected), "members in the reference's order"
        assert line == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # The vectors and the generated set both hold tool 409s, classified and decided.
    assert overridden >= 5
    assert {op["op"] for op in ops} == {"classify", "decide", "key", "backoff", "render"}


def test_python_package_swaps_to_the_template_after_its_smoke_set(template):
    handle = PolicyHandle()
    described = handle.swap(template)
    assert described["name"] == "python-template"
    assert described["size"] == template.stat().st_size
    decision = handle.decide(CONFLICT_OBS, {"call": "tool", "attempt": 1})
    assert decision["action"] == "fail"
    assert decision["policy"]["name"] == "python-template"
    typed = handle.classify({**CONFLICT_OBS, "call": "tool"})
    assert typed["class"] == "permanent"


NODE_SWAP = """
import { Policy } from './node/src/index.js';
const policy = await Policy.load(process.argv[2]);
const before = policy.info().name;
const after = (await policy.swap(process.argv[3])).name;
const d = JSON.parse(policy.decideJson('{"source":"http","status":409}', '{"call":"tool","attempt":1}'));
console.log(JSON.stringify({ before, after, action: d.action }));
"""


def test_node_package_swaps_to_the_template_after_its_smoke_set(template):
    proc = subprocess.run(
        ["node", NODE_FLAG, "--input-type=module", "-e", NODE_SWAP, "-", str(REFERENCE), str(template)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"before": "agent-recovery-reference", "after": "python-template", "action": "fail"}


def node_compiles_extended_const(tmp_path):
    """Whether this Node compiles extended constant expressions without the flag."""
    wat = tmp_path / "extended.wat"
    wat.write_text("(module (global i32 (i32.add (i32.const 1) (i32.const 2))))")
    wasm = tmp_path / "extended.wasm"
    subprocess.run(["wasm-tools", "parse", str(wat), "-o", str(wasm)], check=True)
    script = "const fs = require('fs'); new WebAssembly.Module(fs.readFileSync(process.argv[1]));"
    return subprocess.run(["node", "-e", script, str(wasm)], capture_output=True).returncode == 0


def test_node_without_the_flag_names_it(template, tmp_path):
    script = "import { Policy } from './node/src/index.js'; await Policy.load(process.argv[2]);"
    proc = subprocess.run(
        ["node", "--input-type=module", "-e", script, "-", str(template)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    if node_compiles_extended_const(tmp_path):
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode != 0
        assert f"run Node 20 with `{NODE_FLAG}`" in proc.stderr, proc.stderr
