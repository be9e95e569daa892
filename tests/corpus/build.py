#!/usr/bin/env python3
"""Accuracy on real SDK failures: our class/retryable next to the SDKs' own retry rules.

For every case in `cases.json` (a documented failure of a provider or
protocol, labelled with the class and `retryable` its documentation implies,
page cited), this drives the *real* SDK client against a local server that
replays the documented response (`python/tests/replay.py` on 127.0.0.1), or
the SDK's own in-process server (MCP), and records:

- the observation `agent_recovery.observation_from` makes of what the SDK
  raised or returned, and the envelope's `class` / `retryable` (ours);
- whether the SDK's own retry rule would retry that same failure:
  openai / anthropic `client._should_retry(response)` (and their rule that
  every connection error and timeout is retried), botocore's standard retry
  mode (`StandardRetryConditions` on the `needs-retry` event's context),
  google-api-core `retry.if_transient_error`, google-genai's
  `HttpRetryOptions()` predicate (`_api_client.retry_args`); the MCP and A2A
  SDKs have no retry rule (they never retry), counted as "no".

Prints the table and one summary line; writes `results.md` (and, with
`--json`, every record). Run from a checkout:

    .venv/bin/python tests/corpus/build.py

Uses the checkout's `python/src` (so a rebuilt component and adapters are
picked up), the newest reference component (see `reference_path`), and the SDKs
of the `test` extra (`pip install './python[test]'`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python" / "src"))
sys.path.insert(0, str(ROOT / "python" / "tests"))

from agent_recovery import Policy  # noqa: E402
from agent_recovery.adapters import observation_from  # noqa: E402
from replay import Replay, closed_port  # noqa: E402

TIMEOUT_S = 0.5  # the clients' timeout in the cases where the server never answers (else 30 s)
SDKS = ["openai", "anthropic", "botocore", "google-api-core", "google-genai", "mcp", "a2a"]


# -- driving the SDKs --------------------------------------------------------------------------
# Each driver returns (what the SDK raised or returned, would the SDK's own rule retry it).


def _url(server: Replay, case: Dict[str, Any]) -> str:
    return f"http://127.0.0.1:{closed_port()}" if case["drive"].get("action") == "refused" else server.url


def _stainless_rule(client: Any, exc: BaseException, module: Any) -> bool:
    # an error event in a 200 stream is raised while iterating: never retried
    if isinstance(exc, module.APIStatusError):
        return bool(client._should_retry(exc.response))
    # _base_client.request: every timeout and request exception is retried while retries remain
    return isinstance(exc, module.APIConnectionError)


def drive_openai(server: Replay, case: Dict[str, Any]) -> Tuple[Any, bool]:
    import openai

    client = openai.OpenAI(api_key="sk-test", base_url=_url(server, case) + "/v1", max_retries=0,
                           timeout=server.client_timeout(TIMEOUT_S))
    try:
        out = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}],
                                             stream=bool(case["drive"].get("stream")))
        for _ in out if case["drive"].get("stream") else ():
            pass
    except Exception as exc:
        return exc, _stainless_rule(client, exc, openai)
    raise RuntimeError("the call succeeded")


def drive_anthropic(server: Replay, case: Dict[str, Any]) -> Tuple[Any, bool]:
    import anthropic

    client = anthropic.Anthropic(api_key="sk-ant-test", base_url=_url(server, case), max_retries=0,
                                 timeout=server.client_timeout(TIMEOUT_S))
    try:
        out = client.messages.create(model="claude-opus-4-6", max_tokens=16,
                                     messages=[{"role": "user", "content": "hi"}],
                                     stream=bool(case["drive"].get("stream")))
        for _ in out if case["drive"].get("stream") else ():
            pass
    except Exception as exc:
        return exc, _stainless_rule(client, exc, anthropic)
    raise RuntimeError("the call succeeded")


@functools.lru_cache(maxsize=None)
def _aws_client(service: str, url: str, timeout: float) -> Tuple[Any, List[bool]]:
    import botocore.config
    import botocore.session
    from botocore.retries.standard import RetryEventAdapter, StandardRetryConditions

    config = botocore.config.Config(retries={"mode": "standard", "max_attempts": 1},
                                    connect_timeout=timeout, read_timeout=timeout)
    client = botocore.session.get_session().create_client(
        service, region_name="us-east-1", endpoint_url=url, aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret", config=config)
    verdicts: List[bool] = []
    checker = StandardRetryConditions(max_attempts=3)  # the standard mode's default

    def needs_retry(**kwargs: Any) -> None:  # observes; botocore's own handler still decides
        verdicts.append(checker.is_retryable(RetryEventAdapter().create_retry_context(**kwargs)))

    client.meta.events.register_first("needs-retry", needs_retry)
    return client, verdicts


def drive_botocore(server: Replay, case: Dict[str, Any]) -> Tuple[Any, bool]:
    service = case.get("service", "dynamodb")
    client, verdicts = _aws_client(service, _url(server, case), server.client_timeout(TIMEOUT_S))
    verdicts.clear()
    call: Callable[[], Any] = {
        "dynamodb": lambda: client.list_tables(),
        "s3": lambda: client.list_buckets(),
        "bedrock-runtime": lambda: client.converse(
            modelId="anthropic.claude-opus-4-6-v1:0",
            messages=[{"role": "user", "content": [{"text": "hi"}]}]),
    }[service]
    try:
        call()
    except Exception as exc:
        return exc, bool(verdicts and verdicts[0])
    raise RuntimeError("the call succeeded")


def drive_google_api_core(server: Replay, case: Dict[str, Any]) -> Tuple[Any, bool]:
    import requests
    from google.api_core import exceptions, retry

    try:  # what a REST transport of google-api-core does with the response
        response = requests.get(_url(server, case) + "/v1/projects/p/things",
                                timeout=server.client_timeout(TIMEOUT_S))
        exc: BaseException = exceptions.from_http_response(response)
    except requests.RequestException as e:
        exc = e
    return exc, bool(retry.if_transient_error(exc))


def drive_google_genai(server: Replay, case: Dict[str, Any]) -> Tuple[Any, bool]:
    from google import genai
    from google.genai import types
    from google.genai._api_client import retry_args

    predicate = retry_args(types.HttpRetryOptions())["retry"].predicate
    client = genai.Client(api_key="k", http_options=types.HttpOptions(
        base_url=_url(server, case), timeout=int(server.client_timeout(TIMEOUT_S) * 1000)))
    try:
        client.models.generate_content(model="gemini-2.5-flash", contents="hi")
    except Exception as exc:
        return exc, bool(predicate(exc))
    raise RuntimeError("the call succeeded")


@functools.lru_cache(maxsize=None)
def _mcp_server() -> Any:
    import anyio
    import mcp_types
    from mcp.server.mcpserver import MCPServer
    from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

    server = MCPServer("corpus")

    @server.tool()
    def search(query: str) -> str:
        raise RuntimeError("the search index is unavailable")

    @server.tool()
    def connect_account(account: str) -> str:
        raise UrlElicitationRequiredError([mcp_types.ElicitRequestURLParams(
            mode="url", message="Authorize access", url="https://example.com/oauth",
            elicitation_id="el-1")])

    @server.tool()
    def overloaded(query: str) -> str:
        raise MCPError(code=-32603, message="internal error")

    @server.tool()
    async def never_answers(query: str) -> str:
        await anyio.Event().wait()  # the client's read timeout ends it
        return ""

    return server


def drive_mcp(server: Replay, case: Dict[str, Any]) -> Tuple[Any, bool]:
    from mcp import Client

    kind, args = case["drive"]["mcp"], case["drive"].get("arguments", {})

    async def main() -> Any:
        async with Client(_mcp_server(), read_timeout_seconds=30.0) as client:
            try:
                if kind == "read_resource":
                    return await client.read_resource(args["uri"])
                if kind == "get_prompt":
                    return await client.get_prompt(args["name"], {})
                short = TIMEOUT_S if kind == "never_answers" else None
                return await client.call_tool(kind, args, read_timeout_seconds=short)
            except Exception as exc:
                return exc

    return asyncio.run(main()), False  # the MCP SDK never retries


def drive_a2a(server: Replay, case: Dict[str, Any]) -> Tuple[Any, bool]:
    import httpx
    from a2a.client.transports.jsonrpc import JsonRpcTransport
    from a2a.types import AgentCard, GetTaskRequest

    async def main() -> Any:
        async with httpx.AsyncClient(timeout=server.client_timeout(TIMEOUT_S)) as http:
            transport = JsonRpcTransport(http, AgentCard(), _url(server, case))
            try:
                return await transport.get_task(GetTaskRequest(id="task-1"))
            except Exception as exc:
                return exc

    return asyncio.run(main()), False  # the A2A SDK never retries


DRIVERS = {
    "openai": drive_openai,
    "anthropic": drive_anthropic,
    "botocore": drive_botocore,
    "google-api-core": drive_google_api_core,
    "google-genai": drive_google_genai,
    "mcp": drive_mcp,
    "a2a": drive_a2a,
}


# -- running the corpus ------------------------------------------------------------------------


def run_case(policy: Policy, server: Replay, case: Dict[str, Any]) -> Dict[str, Any]:
    drive = case["drive"]
    if "status" in drive:
        server.set({"status": drive["status"], "headers": list(drive.get("headers", {}).items()),
                    "body": drive.get("body", "")})
    elif drive.get("action") in ("reset", "hang"):
        server.set({"action": drive["action"]})
    obj, sdk_retry = DRIVERS[case["sdk"]](server, case)
    obs = observation_from(obj, call=case.get("call"))
    try:
        env = policy.classify(obs)
        ours: Dict[str, Any] = {"code": env["code"], "class": env["class"], "retryable": env["retryable"]}
    except Exception as e:  # an observation the policy refuses is a miss, not a crash
        ours = {"code": f"error: {e}", "class": None, "retryable": None}
    want = case["expected"]
    return {
        "id": case["id"],
        "sdk": case["sdk"],
        "raised": f"{type(obj).__module__}.{type(obj).__qualname__}",
        "observation": obs,
        "ours": ours,
        "sdk_retry": sdk_retry,
        "expected": want,
        "class_ok": ours["class"] == want["class"],
        "retryable_ok": ours["retryable"] == want["retryable"],
        "sdk_ok": sdk_retry == want["retryable"],
    }


def pct(n: int, d: int) -> str:
    return f"{100 * n / d:.0f}% ({n}/{d})" if d else "-"


def table(records: List[Dict[str, Any]]) -> List[str]:
    lines = ["| SDK | cases | our class right | our `retryable` right | SDK's own retry rule right |",
             "|---|---|---|---|---|"]
    groups = [(s, [r for r in records if r["sdk"] == s]) for s in SDKS] + [("all", records)]
    for name, rs in groups:
        if not rs:
            continue
        n = len(rs)
        lines.append(f"| {'**all**' if name == 'all' else name} | {n} | "
                     f"{pct(sum(r['class_ok'] for r in rs), n)} | "
                     f"{pct(sum(r['retryable_ok'] for r in rs), n)} | "
                     f"{pct(sum(r['sdk_ok'] for r in rs), n)} |")
    return lines


def summary(records: List[Dict[str, Any]]) -> str:
    n = len(records)
    return (f"corpus: {n} cases; ours: class {pct(sum(r['class_ok'] for r in records), n)}, "
            f"retryable {pct(sum(r['retryable_ok'] for r in records), n)}; "
            f"SDKs' own retry rules: {pct(sum(r['sdk_ok'] for r in records), n)}")


def markdown(records: List[Dict[str, Any]], cases: Dict[str, Dict[str, Any]]) -> str:
    def yn(v: Any) -> str:
        return {True: "yes", False: "no", None: "-"}[v]

    out = ["# Accuracy on real SDK failures", "",
           "Generated by `.venv/bin/python tests/corpus/build.py` from `tests/corpus/cases.json`: "
           "each case is driven through the real SDK against a local server; *expected* comes from "
           "the provider's documentation (linked per case). \"SDK rule\" is whether the SDK's own "
           "retry rule would retry the same failure (see the script's docstring).", ""]
    out += table(records)
    out += ["", "## Cases", "",
            "| case | SDK raised / returned | our code | ours: class, retryable | expected | SDK rule retries | doc |",
            "|---|---|---|---|---|---|---|"]
    for r in records:
        mark = "" if r["class_ok"] and r["retryable_ok"] else " ✗"
        sdk_mark = "" if r["sdk_ok"] else " ✗"
        want = r["expected"]
        out.append(
            f"| {r['id']} | `{r['raised'].rsplit('.', 1)[-1]}` | `{r['ours']['code']}` | "
            f"{r['ours']['class']}, {yn(r['ours']['retryable'])}{mark} | "
            f"{want['class']}, {yn(want['retryable'])} | {yn(r['sdk_retry'])}{sdk_mark} | "
            f"[doc]({cases[r['id']]['doc']}) |")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=Path, default=HERE / "cases.json")
    ap.add_argument("--out", type=Path, default=HERE / "results.md", help="the Markdown report")
    ap.add_argument("--json", type=Path, help="also write every record (observation included)")
    ap.add_argument("--sdk", action="append", choices=SDKS, help="only these SDKs (repeatable)")
    args = ap.parse_args()
    cases: List[Dict[str, Any]] = json.loads(args.cases.read_text())
    if args.sdk:
        cases = [c for c in cases if c["sdk"] in args.sdk]
    # the SDKs log every request and the MCP server every handler error: keep the table readable
    logging.disable(logging.ERROR)
    policy = Policy.load()
    records = []
    with Replay() as server:
        for case in cases:
            records.append(run_case(policy, server, case))
    by_id = {c["id"]: c for c in cases}
    args.out.write_text(markdown(records, by_id))
    if args.json:
        args.json.write_text(json.dumps(records, indent=1) + "\n")
    print("\n".join(table(records)))
    print(summary(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
