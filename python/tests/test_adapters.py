"""`observation_from` on the real SDK objects, produced the way each SDK does.

Every exception or result here comes from the installed SDK itself: the real
client drives a real request against a local server (`replay.Replay`, on
127.0.0.1) that answers with a provider's documented failure, or the SDK's
own in-process server (MCP). Nothing is hand-built to look like an SDK class.
The expected classes come from the providers' documentation, cited per case.
"""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import sys
from typing import Any, Callable, Dict, Iterator, List, Tuple

# The SDKs are in the `test` extra (python/pyproject.toml): a missing one fails here.
import anthropic
import botocore.config
import botocore.session as botocore_session
import openai
import pytest
import requests
from google import genai
from google.api_core import exceptions as gexc, retry as gretry
from google.genai import types as gtypes

from agent_recovery import Policy, RecoveryError, retry_sync
from agent_recovery.adapters import failed_result, observation_from

from .replay import Replay, closed_port, reply

TIMEOUT_S = 0.5  # the clients' own timeout, for the "server never answers" cases


@pytest.fixture(scope="module")
def server() -> Iterator[Replay]:
    with Replay() as r:
        yield r


def header(obs: Dict[str, Any], name: str) -> Any:
    return next((v for k, v in obs.get("headers", []) if k.lower() == name), None)


def raised(fn: Callable[[], Any]) -> BaseException:
    try:
        fn()
    except Exception as e:  # the SDK's own exception, whatever it is
        return e
    raise AssertionError("the SDK call did not fail")


def verdict(policy: Policy, obs: Dict[str, Any]) -> Tuple[str, str, bool]:
    env = policy.classify(obs)
    return env["code"], env["class"], env["retryable"]


# -- OpenAI ---------------------------------------------------------------------------
# https://platform.openai.com/docs/guides/error-codes#api-errors


def openai_client(url: str, timeout: float = 30.0) -> Any:
    return openai.OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0, timeout=timeout)


def chat(client: Any) -> Callable[[], Any]:
    return lambda: client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
    )


def test_openai_rate_limit_keeps_status_headers_and_body(server: Replay, policy: Policy) -> None:
    body = {"error": {"message": "Rate limit reached for gpt-4o", "type": "tokens", "param": None,
                      "code": "rate_limit_exceeded"}}
    server.set(reply(429, body, {"retry-after": "2", "x-request-id": "req_abc"}))
    exc = raised(chat(openai_client(server.url)))
    assert type(exc) is openai.RateLimitError
    obs = observation_from(exc)
    assert obs["source"] == "http" and obs["status"] == 429 and obs["provider"] == "openai"
    assert header(obs, "retry-after") == "2" and header(obs, "x-request-id") == "req_abc"
    assert json.loads(obs["body"]) == body  # the raw body, as the server sent it
    env = policy.classify(obs)
    # "429 Rate limit reached for requests: pace your requests" -> wait and retry
    assert (env["class"], env["retryable"], env["retry_after_ms"]) == ("transient", True, 2000)
    assert env["request_id"] == "req_abc"


@pytest.mark.parametrize(
    "status, error, expected",
    [
        # "429 You exceeded your current quota: buy more credits" -> not a retry
        (429, {"type": "insufficient_quota", "code": "insufficient_quota"}, ("policy", False)),
        # "401 Invalid Authentication / Incorrect API key provided" -> fix the key
        (401, {"type": "invalid_request_error", "code": "invalid_api_key"}, ("permanent", False)),
        # "500 The server had an error while processing your request: retry after a brief wait"
        (500, {"type": "server_error", "code": None}, ("transient", True)),
        # "503 The engine is currently overloaded: retry after a brief wait"
        (503, {"type": "server_error", "code": None}, ("transient", True)),
    ],
)
def test_openai_status_errors(
    server: Replay, policy: Policy, status: int, error: Dict[str, Any], expected: Tuple[str, bool]
) -> None:
    server.set(reply(status, {"error": {"message": "m", "param": None, **error}}))
    exc = raised(chat(openai_client(server.url)))
    assert isinstance(exc, openai.APIStatusError) and exc.status_code == status
    _, cls, retryable = verdict(policy, observation_from(exc, call="llm"))
    assert (cls, retryable) == expected


def test_openai_context_overflow_is_for_the_model_to_fix(server: Replay, policy: Policy) -> None:
    # "context_length_exceeded: reduce the length of the messages" -> re-plan, not retry
    server.set(reply(400, {"error": {"message": "maximum context length is 128000 tokens",
                                     "type": "invalid_request_error", "param": "messages",
                                     "code": "context_length_exceeded"}}))
    exc = raised(chat(openai_client(server.url)))
    assert type(exc) is openai.BadRequestError
    env = policy.classify(observation_from(exc))
    assert (env["class"], env["retryable"], env["field"]) == ("semantic", False, "messages")


def test_openai_connection_errors_follow_the_cause_chain(server: Replay, policy: Policy) -> None:
    server.set({"action": "reset"})
    exc = raised(chat(openai_client(server.url)))
    assert type(exc) is openai.APIConnectionError  # the SDK's wrapper; the reset is in __cause__
    obs = observation_from(exc)
    assert (obs["source"], obs["code"], obs["provider"]) == ("network", "ECONNRESET", "openai")
    assert verdict(policy, obs)[1:] == ("transient", True)

    refused = raised(chat(openai_client(f"http://127.0.0.1:{closed_port()}")))
    assert type(refused) is openai.APIConnectionError
    obs = observation_from(refused)
    assert (obs["source"], obs["code"]) == ("network", "ECONNREFUSED")
    assert verdict(policy, obs)[1:] == ("transient", True)


def test_openai_timeout_names_the_phase_and_the_configured_limit(server: Replay, policy: Policy) -> None:
    server.set({"action": "hang"})
    exc = raised(chat(openai_client(server.url, TIMEOUT_S)))
    assert type(exc) is openai.APITimeoutError
    obs = observation_from(exc)
    assert obs == {"source": "timeout", "phase": "read", "after_ms": int(TIMEOUT_S * 1000),
                   "provider": "openai"}
    assert verdict(policy, obs)[1:] == ("transient", True)


def test_openai_error_event_in_a_200_stream(server: Replay, policy: Policy) -> None:
    error = {"message": "The server had an error while processing your request.",
             "type": "server_error", "param": None, "code": None}
    server.set({"status": 200, "headers": [["content-type", "text/event-stream"]],
                "body": "event: error\ndata: " + json.dumps({"error": error}) + "\n\n"})
    client = openai_client(server.url)
    exc = raised(lambda: list(client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)))
    assert type(exc) is openai.APIError  # no response: the SDK keeps only the event's `error`
    obs = observation_from(exc)
    assert (obs["status"], obs["body"]) == (200, {"error": error})
    # "500 The server had an error while processing your request: retry after a brief wait"
    assert verdict(policy, obs)[1:] == ("transient", True)


# -- Anthropic ---------------------------------------------------------------------------
# https://docs.anthropic.com/en/api/errors


def messages(url: str, timeout: float = 30.0) -> Callable[[], Any]:
    client = anthropic.Anthropic(api_key="sk-ant-test", base_url=url, max_retries=0, timeout=timeout)
    return lambda: client.messages.create(
        model="claude-opus-4-6", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
    )


@pytest.mark.parametrize(
    "status, etype, sdk_class, expected",
    [
        # "529 overloaded_error: the API is temporarily overloaded" -> retry
        (529, "overloaded_error", "OverloadedError", ("transient", True)),
        # "400 invalid_request_error: an issue with the format or content of your request"
        (400, "invalid_request_error", "BadRequestError", ("permanent", False)),
        # "413 request_too_large: request exceeds the maximum allowed number of bytes"
        # an LLM request that is too large is fixed by shrinking it (replan)
        (413, "request_too_large", "ContentTooLargeError", ("semantic", False)),
        # "429 rate_limit_error: your account has hit a rate limit" -> retry
        (429, "rate_limit_error", "RateLimitError", ("transient", True)),
        # "500 api_error: an unexpected error has occurred internal to Anthropic's systems"
        (500, "api_error", "InternalServerError", ("transient", True)),
    ],
)
def test_anthropic_status_errors(
    server: Replay, policy: Policy, status: int, etype: str, sdk_class: str, expected: Tuple[str, bool]
) -> None:
    body = {"type": "error", "error": {"type": etype, "message": "m"}, "request_id": "req_011"}
    server.set(reply(status, body, {"request-id": "req_011"}))
    exc = raised(messages(server.url))
    assert type(exc).__name__ == sdk_class and isinstance(exc, anthropic.APIStatusError)
    obs = observation_from(exc)
    assert (obs["status"], obs["provider"], json.loads(obs["body"])) == (status, "anthropic", body)
    env = policy.classify(obs)
    assert (env["class"], env["retryable"]) == expected
    assert env["request_id"] == "req_011"


def test_anthropic_timeout_and_reset(server: Replay, policy: Policy) -> None:
    server.set({"action": "hang"})
    exc = raised(messages(server.url, TIMEOUT_S))
    assert type(exc) is anthropic.APITimeoutError
    obs = observation_from(exc)
    assert (obs["source"], obs["phase"], obs["after_ms"]) == ("timeout", "read", 500)
    server.set({"action": "reset"})
    exc = raised(messages(server.url))
    assert type(exc) is anthropic.APIConnectionError
    assert observation_from(exc)["code"] == "ECONNRESET"
    assert verdict(policy, observation_from(exc))[1:] == ("transient", True)


def test_anthropic_error_event_in_a_200_stream(server: Replay, policy: Policy) -> None:
    # "When receiving a streaming response via SSE, it's possible that an error can
    # occur after returning a 200 response"
    event = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    start = {"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "content": [], "model": "m",
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}
    server.set({"status": 200, "headers": [["content-type", "text/event-stream"]],
                "body": f"event: message_start\ndata: {json.dumps(start)}\n\n"
                        f"event: error\ndata: {json.dumps(event)}\n\n"})
    client = anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0, timeout=30.0)
    exc = raised(lambda: list(client.messages.create(
        model="claude-opus-4-6", max_tokens=16, messages=[{"role": "user", "content": "hi"}],
        stream=True)))
    assert isinstance(exc, anthropic.APIStatusError) and exc.status_code == 200
    obs = observation_from(exc)
    assert (obs["status"], obs["body"]) == (200, event)  # the event, not the consumed stream
    assert verdict(policy, obs)[1:] == ("transient", True)


# -- botocore ------------------------------------------------------------------------------
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html
# https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html


@functools.lru_cache(maxsize=None)
def aws_client(service: str, url: str, timeout: float = 30.0) -> Any:  # loading a model: ~1 s
    config = botocore.config.Config(
        retries={"mode": "standard", "max_attempts": 1}, connect_timeout=timeout,
        read_timeout=timeout,
    )
    return botocore_session.get_session().create_client(
        service, region_name="us-east-1", endpoint_url=url, aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret", config=config,
    )


@pytest.mark.parametrize(
    "error_type, expected",
    [
        # "ProvisionedThroughputExceededException ... OK to retry? Yes"
        ("ProvisionedThroughputExceededException", ("transient", True)),
        # "ThrottlingException ... OK to retry? Yes"
        ("ThrottlingException", ("transient", True)),
        # "ValidationException ... OK to retry? No"
        ("ValidationException", ("permanent", False)),
        # "ResourceNotFoundException ... OK to retry? No"
        ("ResourceNotFoundException", ("permanent", False)),
    ],
)
def test_botocore_client_error_from_a_json_service(
    server: Replay, policy: Policy, error_type: str, expected: Tuple[str, bool]
) -> None:
    body = {"__type": f"com.amazonaws.dynamodb.v20120810#{error_type}", "message": "m"}
    server.set(reply(400, body, {"content-type": "application/x-amz-json-1.0",
                                 "x-amzn-RequestId": "RID123"}))
    exc = raised(aws_client("dynamodb", server.url).list_tables)
    assert exc.response["Error"]["Code"] == error_type  # botocore's parse, read by the adapter
    obs = observation_from(exc)
    assert (obs["status"], obs["provider"], obs["request_id"]) == (400, "aws", "RID123")
    assert obs["body"]["__type"] == error_type
    assert verdict(policy, obs)[1:] == expected


def test_botocore_client_error_from_an_xml_service(server: Replay, policy: Policy) -> None:
    # S3 "503 SlowDown: Reduce your request rate" -> back off and retry
    server.set(reply(503, "<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message>"
                          "<RequestId>R1</RequestId></Error>", {"content-type": "application/xml"}))
    exc = raised(aws_client("s3", server.url).list_buckets)
    obs = observation_from(exc)
    assert (obs["status"], obs["body"]["__type"]) == (503, "SlowDown")
    assert verdict(policy, obs)[1:] == ("transient", True)


def test_botocore_transport_failures(server: Replay, policy: Policy) -> None:
    server.set({"action": "hang"})
    exc = raised(aws_client("dynamodb", server.url, TIMEOUT_S).list_tables)
    assert type(exc).__name__ == "ReadTimeoutError"
    assert observation_from(exc) == {"source": "timeout", "phase": "read", "provider": "aws"}
    server.set({"action": "reset"})
    exc = raised(aws_client("dynamodb", server.url).list_tables)
    assert type(exc).__name__ == "ConnectionClosedError"
    assert observation_from(exc)["code"] == "ECONNRESET"
    exc = raised(aws_client("dynamodb", f"http://127.0.0.1:{closed_port()}").list_tables)
    assert type(exc).__name__ == "EndpointConnectionError"
    # urllib3's NewConnectionError derives from ConnectTimeoutError: not a timeout
    obs = observation_from(exc)
    assert (obs["source"], obs["code"]) == ("network", "ECONNREFUSED")
    assert verdict(policy, obs)[1:] == ("transient", True)


# -- Google ------------------------------------------------------------------------------------
# https://cloud.google.com/apis/design/errors#handling_errors
# https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes


def google_error(server: Replay, status: int, error: Dict[str, Any]) -> BaseException:
    """What a REST client of google-api-core raises for the response."""
    server.set(reply(status, {"error": {"code": status, "message": "m", **error}}))
    return gexc.from_http_response(requests.get(server.url + "/v1/projects/p/things"))


def test_google_api_core_errors(server: Replay, policy: Policy) -> None:
    # RESOURCE_EXHAUSTED with RetryInfo: "retry after the delay"
    exc = google_error(server, 429, {"status": "RESOURCE_EXHAUSTED", "details": [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]})
    assert type(exc) is gexc.TooManyRequests
    env = policy.classify(observation_from(exc))
    assert (env["class"], env["retryable"], env["retry_after_ms"]) == ("transient", True, 7000)
    # INVALID_ARGUMENT: "do not retry without fixing the problem"; the field violation is kept
    exc = google_error(server, 400, {"status": "INVALID_ARGUMENT", "details": [
        {"@type": "type.googleapis.com/google.rpc.BadRequest",
         "fieldViolations": [{"field": "page_size", "description": "must be positive"}]}]})
    assert type(exc) is gexc.BadRequest
    env = policy.classify(observation_from(exc))
    assert (env["class"], env["retryable"], env["field"]) == ("permanent", False, "page_size")
    # UNAVAILABLE: "retry using exponential backoff"
    exc = google_error(server, 503, {"status": "UNAVAILABLE"})
    assert verdict(policy, observation_from(exc))[1:] == ("transient", True)


def test_google_api_core_retry_error_is_its_cause(server: Replay, policy: Policy) -> None:
    exc = google_error(server, 503, {"status": "UNAVAILABLE"})

    def fails() -> None:
        raise exc

    # a Retry whose deadline is already spent gives up at the first failure (no sleeping)
    retry = gretry.Retry(predicate=gretry.if_transient_error, initial=0.0, maximum=0.0, timeout=0.0)
    wrapped = raised(retry(fails))
    assert type(wrapped) is gexc.RetryError and wrapped.cause is exc
    assert observation_from(wrapped) == observation_from(exc)


def test_google_api_core_error_without_a_response(policy: Policy) -> None:
    # gRPC and other transports build the exception with the SDK's factory, no response:
    # the adapter writes the google.rpc.Status it carries
    exc = gexc.from_http_status(429, "Quota exceeded", details=[
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}])
    assert type(exc) is gexc.TooManyRequests and exc.response is None
    obs = observation_from(exc)
    assert obs["status"] == 429 and obs["body"]["error"]["details"][0]["retryDelay"] == "3s"
    env = policy.classify(obs)
    assert (env["class"], env["retryable"], env["retry_after_ms"]) == ("transient", True, 3000)


def test_google_api_core_error_with_grpc_style_details(policy: Policy) -> None:
    # over gRPC, google-api-core hands the unpacked detail messages to the factory
    from google.protobuf.duration_pb2 import Duration
    from google.rpc import error_details_pb2

    retry_info = error_details_pb2.RetryInfo(retry_delay=Duration(seconds=2, nanos=500_000_000))
    exc = gexc.from_http_status(503, "unavailable", details=[retry_info])
    obs = observation_from(exc)
    assert obs["body"]["error"]["details"] == [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2.500s"}]
    assert policy.classify(obs)["retry_after_ms"] == 2500


def test_google_genai_errors(server: Replay, policy: Policy) -> None:
    def generate(timeout_s: float = 30.0) -> Any:
        client = genai.Client(api_key="k", http_options=gtypes.HttpOptions(
            base_url=server.url, timeout=int(timeout_s * 1000)))
        return client.models.generate_content(model="gemini-2.5-flash", contents="hi")

    # "503 UNAVAILABLE: the service may be temporarily overloaded" -> retry
    server.set(reply(503, {"error": {"code": 503, "message": "The model is overloaded.",
                                     "status": "UNAVAILABLE"}}))
    exc = raised(generate)
    assert type(exc).__name__ == "ServerError" and exc.code == 503
    obs = observation_from(exc)
    assert (obs["status"], obs["provider"]) == (503, "google")
    assert verdict(policy, obs)[1:] == ("transient", True)
    # "400 INVALID_ARGUMENT: the request body is malformed" -> fix it
    server.set(reply(400, {"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}))
    exc = raised(generate)
    assert type(exc).__name__ == "ClientError"
    assert verdict(policy, observation_from(exc))[1:] == ("permanent", False)
    # the SDK lets the HTTP client's timeout through unwrapped
    server.set({"action": "hang"})
    exc = raised(lambda: generate(TIMEOUT_S))
    assert observation_from(exc) == {"source": "timeout", "phase": "read", "after_ms": 500}


# -- MCP ---------------------------------------------------------------------------------------
# https://modelcontextprotocol.io/specification/2025-11-25/server/tools#error-handling


def run_mcp(calls: Callable[[Any], Any]) -> List[Any]:
    import mcp_types
    from mcp import Client
    from mcp.server.mcpserver import MCPServer
    from mcp.shared.exceptions import UrlElicitationRequiredError

    server = MCPServer("test-server")

    @server.tool()
    def search(query: str) -> str:
        raise RuntimeError("the index is down")

    @server.tool()
    def echo(text: str) -> str:
        return text

    @server.tool()
    def connect_account(account: str) -> str:
        raise UrlElicitationRequiredError([mcp_types.ElicitRequestURLParams(
            mode="url", message="Authorize access", url="https://example.com/oauth",
            elicitation_id="el-1")])

    async def main() -> List[Any]:
        out: List[Any] = []
        async with Client(server) as client:
            for call in calls(client):
                try:
                    out.append(await call)
                except Exception as e:
                    out.append(e)
        return out

    return asyncio.run(main())


def test_mcp_results_and_errors(policy: Policy) -> None:
    tool_error, unknown_resource, elicitation = run_mcp(lambda c: [
        c.call_tool("search", {"query": "x"}),
        c.read_resource("file:///missing"),
        c.call_tool("connect_account", {"account": "a"}),
    ])
    # "Tool Execution Errors: reported in the result with isError: true ... so the
    # LLM can see the error and self-correct" -> the model re-plans
    assert type(tool_error).__name__ == "CallToolResult" and tool_error.is_error
    obs = observation_from(tool_error)
    assert obs["source"] == "mcp" and obs["message"]["result"]["isError"] is True
    env = policy.classify(obs)
    assert (env["code"], env["class"], env["retryable"]) == ("tool.mcp.tool_error", "semantic", False)
    # "Resource not found: -32602 (invalid params)" -> not retried unchanged; invalid
    # params are for the caller (the model) to fix: semantic, re-plan
    assert type(unknown_resource).__name__ == "MCPError" and unknown_resource.error.code == -32602
    obs = observation_from(unknown_resource)
    assert obs["message"]["error"]["code"] == -32602
    assert verdict(policy, obs)[1:] == ("semantic", False)
    # "-32042 URLElicitationRequiredError: the client must complete the elicitation"
    assert type(elicitation).__name__ == "UrlElicitationRequiredError"
    obs = observation_from(elicitation)
    assert obs["message"]["error"]["data"]["elicitations"][0]["url"] == "https://example.com/oauth"
    assert policy.decide(obs, {"seed": 1})["action"] == "await_input"


def returned_by_retry(policy: Policy, value: Any, call: str) -> Any:
    """What `retry_sync` makes of an operation that returns `value`."""
    try:
        return retry_sync(lambda **_: value, policy=policy, call=call, run_id="r", step_id="s",
                          tool="t", args={}, seed=1, sleep=lambda _: None)
    except RecoveryError as e:
        return e


def test_mcp_results_returned_to_the_retry_helper(policy: Policy) -> None:
    failed, ok = run_mcp(lambda c: [c.call_tool("search", {"query": "x"}),
                                    c.call_tool("echo", {"text": "hello"})])
    assert failed_result(ok) is None and failed_result(failed) == observation_from(failed)
    stopped = returned_by_retry(policy, failed, "tool")
    assert isinstance(stopped, RecoveryError) and stopped.action == "replan"
    assert returned_by_retry(policy, ok, "tool") is ok


# -- A2A -----------------------------------------------------------------------------------------
# https://a2a-protocol.org/latest/specification/#8-error-handling


def a2a_get_task(server: Replay, answer: Dict[str, Any]) -> Any:
    import httpx
    from a2a.client.transports.jsonrpc import JsonRpcTransport
    from a2a.types import AgentCard, GetTaskRequest

    server.set(answer)

    async def main() -> Any:
        async with httpx.AsyncClient(timeout=server.client_timeout(TIMEOUT_S)) as http:
            transport = JsonRpcTransport(http, AgentCard(), server.url)
            try:
                return await transport.get_task(GetTaskRequest(id="task-1"))
            except Exception as e:
                return e

    return asyncio.run(main())


def test_a2a_tasks_and_errors(server: Replay, policy: Policy) -> None:
    # "-32001 TaskNotFoundError: the task ID does not exist" -> state: the
    # caller's view of the task is stale (restore, then retry; docs/frameworks-and-protocols.md)
    exc = a2a_get_task(server, reply(200, {"jsonrpc": "2.0", "id": "1",
                                           "error": {"code": -32001, "message": "Task not found"}}))
    assert type(exc).__name__ == "TaskNotFoundError"
    obs = observation_from(exc)
    assert (obs["source"], obs["message"]["error"]["code"]) == ("a2a", -32001)
    assert verdict(policy, obs)[1] == "state"
    # a task in TASK_STATE_INPUT_REQUIRED: "the agent requires additional input"
    task = a2a_get_task(server, reply(200, {"jsonrpc": "2.0", "id": "1", "result": {
        "id": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
        "message": {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "Which account?"}]}}}}))
    assert type(task).__name__ == "Task"
    obs = observation_from(task)
    assert obs["message"]["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert policy.decide(obs, {"seed": 1})["action"] == "await_input"
    assert returned_by_retry(policy, task, "agent").action == "await_input"
    # TASK_STATE_FAILED is terminal: "the task finished but failed"; not retried as is
    task = a2a_get_task(server, reply(200, {"jsonrpc": "2.0", "id": "1", "result": {
        "id": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_FAILED"}}}))
    assert verdict(policy, observation_from(task))[2] is False
    assert failed_result(task) is not None
    done = a2a_get_task(server, reply(200, {"jsonrpc": "2.0", "id": "1", "result": {
        "id": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_COMPLETED"}}}))
    assert type(done).__name__ == "Task" and failed_result(done) is None
    assert returned_by_retry(policy, done, "agent") is done
    # the client's error over an HTTP 503 is that response
    exc = a2a_get_task(server, reply(503, "unavailable", {"content-type": "text/plain"}))
    assert type(exc).__name__ == "A2AClientError"
    obs = observation_from(exc)
    assert (obs["source"], obs["status"]) == ("http", 503)
    assert verdict(policy, obs)[1:] == ("transient", True)


# -- the package itself ---------------------------------------------------------------------------


def test_no_sdk_is_imported_by_the_package() -> None:
    code = (
        "import sys, agent_recovery, agent_recovery.adapters as a;"
        "print(a.observation_from(ValueError('x'))['type']);"
        "print(sorted(m for m in ('openai','anthropic','botocore','google','mcp','a2a','httpx',"
        "'httpx2','requests') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["builtins.ValueError", "[]"]


def test_plain_httpx_errors(server: Replay, policy: Policy) -> None:
    import httpx

    server.set(reply(503, {"error": "busy"}, {"retry-after": "4"}))
    with httpx.Client(timeout=30.0) as client:
        exc = raised(lambda: client.get(server.url).raise_for_status())
        assert type(exc) is httpx.HTTPStatusError
        obs = observation_from(exc, call="tool")
        assert (obs["source"], obs["status"], header(obs, "retry-after")) == ("http", 503, "4")
        assert policy.classify(obs)["retry_after_ms"] == 4000
    server.set({"action": "hang"})
    with httpx.Client(timeout=TIMEOUT_S) as client:
        exc = raised(lambda: client.get(server.url))
        assert type(exc) is httpx.ReadTimeout
        assert observation_from(exc) == {"source": "timeout", "phase": "read", "after_ms": 500}


def test_other_objects_fall_back_to_plain_observations(policy: Policy) -> None:
    assert observation_from({"source": "http", "status": 503}, call="tool") == {
        "source": "http", "status": 503, "call": "tool"}
    obs = observation_from(ConnectionResetError(104, "Connection reset by peer"))
    assert (obs["source"], obs["code"]) == ("network", "ECONNRESET")
    obs = observation_from(object())
    assert obs["source"] == "exception" and obs["type"] == "builtins.object"
    policy.classify(obs)  # a valid observation


class _Hostile(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no string for you")

    @property
    def response(self) -> Any:
        raise RuntimeError("no response either")


def test_hostile_and_cyclic_objects_still_give_an_observation(policy: Policy) -> None:
    obs = observation_from(_Hostile())
    assert obs["source"] == "exception" and obs["type"].endswith("_Hostile")
    policy.classify(obs)
    a, b = ValueError("a"), ValueError("b")
    a.__cause__, b.__cause__ = b, a  # a cycle
    assert observation_from(a)["type"] == "builtins.ValueError"
    try:  # raised while handling a reset, not caused by it: not a network failure
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError:
            # no `from`: the test needs the implicit __context__ that `from` would replace
            raise ValueError("bad input")  # noqa: B904
    except ValueError as e:
        assert observation_from(e)["type"] == "builtins.ValueError"
    deep: BaseException = ConnectionRefusedError(111, "Connection refused")
    for _ in range(50):  # deeper than the chain is followed
        outer = RuntimeError("wrapped")
        outer.__cause__ = deep
        deep = outer
    assert observation_from(deep)["source"] == "exception"
