"""The Temporal bridge (agent_recovery.temporal) with a real worker against a
real Temporal dev server on 127.0.0.1 (tests/temporal_env.py), running the
code blocks of docs/integrations/temporal.md as written.

Attempt timings are read from the workflow's history (event times, the
attempt number and the last failure Temporal recorded), never from sleeps.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
import json
import os
import re
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from types import ModuleType
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
import requests
from temporalio import activity
from temporalio.api.enums.v1 import RetryState
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

from agent_recovery import PolicyError
from agent_recovery.temporal import recover_activity

from .conftest import repo_root, vectors_dir
from .subset import mismatches
from .temporal_env import DevServer, Shop, failure_details, history_activities

DOC = repo_root() / "docs" / "integrations" / "temporal.md"


def vector(file: str, name: str) -> Dict[str, Any]:
    for case in json.loads((vectors_dir() / file).read_text()):
        if case["name"] == name:
            return dict(case)
    raise AssertionError(f"no vector {name!r} in {file}")


# Stripe's card decline (its source is Stripe's error documentation, cited by the vector file).
DECLINE = vector("providers.json", "stripe 402 card_error is a decline with field, docs and decline code")
FORBIDDEN = vector("http.json", "status 403")
UNAVAILABLE = vector("http.json", "status 503")


def as_response(case: Dict[str, Any]) -> Tuple[int, Dict[str, str], Any]:
    obs = case["observation"]
    return obs["status"], dict(obs.get("headers") or {}), obs["body"]


def doc_blocks() -> Dict[str, str]:
    """The page's python blocks under its "Quickstart" and "Sagas" headings."""
    text = DOC.read_text()
    blocks = {}
    for heading in ("Quickstart", "Sagas"):
        section = text.split(f"\n## {heading}\n", 1)[1]
        match = re.search(r"```python\n(.*?)```", section, re.S)
        assert match is not None, f"no python block under '## {heading}' in {DOC}"
        blocks[heading] = match.group(1)
    return blocks


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    dev = DevServer()
    yield dev
    dev.stop()


@pytest.fixture(scope="module")
def shop() -> Iterator[Shop]:
    s = Shop()
    before = os.environ.get("SHOP_URL")
    os.environ["SHOP_URL"] = s.url  # what the quickstart's activity reads
    yield s
    if before is None:
        del os.environ["SHOP_URL"]
    else:
        os.environ["SHOP_URL"] = before
    s.stop()


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The page's quickstart and saga blocks, as one importable module (the
    workflow sandbox imports a workflow's module by name)."""
    folder = tmp_path_factory.mktemp("temporal_doc")
    blocks = doc_blocks()
    (folder / "temporal_doc_quickstart.py").write_text(blocks["Quickstart"] + "\n" + blocks["Sagas"])
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module("temporal_doc_quickstart")
    finally:
        sys.path.remove(str(folder))


def test_the_quickstart_is_at_most_15_lines() -> None:
    lines = doc_blocks()["Quickstart"].rstrip("\n").split("\n")
    assert len(lines) <= 15, f"the quickstart has {len(lines)} lines"


async def checkout(server: DevServer, module: ModuleType, order: str) -> Tuple[Any, Optional[BaseException], str]:
    """Run the page's `Checkout` workflow for `order` on a new worker; its
    history, the error it failed with (None when it completed) and its id."""
    client = await Client.connect(server.address)
    queue, workflow_id = f"shop-{uuid.uuid4().hex}", f"checkout-{order}-{uuid.uuid4().hex}"
    error: Optional[BaseException] = None
    async with Worker(client, task_queue=queue, workflows=[module.Checkout], activities=[module.post]):
        try:
            # The execution timeout only bounds a broken run; nothing here waits on it.
            await client.execute_workflow(
                module.Checkout.run, order, id=workflow_id, task_queue=queue, execution_timeout=timedelta(seconds=60)
            )
        except WorkflowFailureError as e:
            error = e.cause
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return history, error, workflow_id


def documented_key(workflow_id: str, activity_id: str, tool: str, args: List[Any]) -> str:
    """The documented key, hex(sha256(canonical JSON of [run_id, step_id, tool, args]))
    (tests/vectors/tools/keys.py), computed here with the standard library only."""
    parts = [workflow_id, activity_id, tool, {"args": args, "kwargs": {}}]
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_429_with_retry_after_is_retried_after_that_delay_with_one_key(
    server: DevServer, shop: Shop, quickstart: ModuleType
) -> None:
    order = f"o-{uuid.uuid4().hex[:8]}"
    shop.plan("/charge", order, (429, {"Retry-After": "2"}, {"error": {"message": "slow down"}}))
    history, error, workflow_id = asyncio.run(checkout(server, quickstart, order))
    assert error is None, f"the workflow failed: {error!r}"

    charge, reserve, ship = history_activities(history)
    assert charge.input == ["/charge", order]
    assert charge.attempt == 2 and reserve.attempt == 1 and ship.attempt == 1
    failed = charge.last_failure.application_failure_info
    assert failed.non_retryable is False
    envelope, decision = failure_details(charge.last_failure)
    # RFC 9110 section 10.2.3: Retry-After: 2 is two seconds (more than Temporal's own first interval, 1 s).
    assert envelope["retry_after_ms"] == 2000
    assert decision["action"] == "retry" and failed.type == envelope["code"]
    delay = failed.next_retry_delay.ToTimedelta()
    assert delay == timedelta(milliseconds=decision["delay_ms"]) and delay >= timedelta(seconds=2)
    # The second attempt started no sooner than that delay after the first was scheduled.
    gap = charge.started.event_time.ToDatetime() - charge.scheduled.event_time.ToDatetime()
    assert gap >= delay, f"attempt 2 started {gap} after scheduling, before the {delay} retry delay"

    sent = shop.requests(order)
    assert [r["path"] for r in sent] == ["/charge", "/charge", "/reserve", "/ship"]
    assert sent[0]["key"] == sent[1]["key"] == documented_key(workflow_id, charge.activity_id, "post", charge.input)
    assert sent[2]["key"] == documented_key(workflow_id, reserve.activity_id, "post", reserve.input)
    assert len({r["key"] for r in sent}) == 3


def test_a_permanent_decline_ends_non_retryable_with_the_envelope(
    server: DevServer, shop: Shop, quickstart: ModuleType
) -> None:
    order = f"o-{uuid.uuid4().hex[:8]}"
    shop.plan("/charge", order, as_response(DECLINE))
    history, error, _ = asyncio.run(checkout(server, quickstart, order))

    assert isinstance(error, ActivityError) and isinstance(error.cause, ApplicationError)
    assert error.cause.non_retryable is True
    (charge,) = history_activities(history)
    assert charge.attempt == 1
    failure = charge.failure
    assert failure.application_failure_info.non_retryable is True
    assert charge.closed.activity_task_failed_event_attributes.retry_state == RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE
    envelope, decision = failure_details(failure)
    assert mismatches(DECLINE["expect"]["envelope"], envelope) == []
    assert mismatches(DECLINE["expect"]["decision"], decision) == []
    assert failure.application_failure_info.type == DECLINE["expect"]["envelope"]["code"]
    assert list(error.cause.details) == [envelope, decision]
    assert [r["path"] for r in shop.requests(order)] == ["/charge"]  # nothing to compensate


def test_a_saga_failure_runs_the_compensations_in_reverse(
    server: DevServer, shop: Shop, quickstart: ModuleType
) -> None:
    order = f"o-{uuid.uuid4().hex[:8]}"
    shop.plan("/ship", order, as_response(FORBIDDEN))
    history, error, _ = asyncio.run(checkout(server, quickstart, order))

    assert isinstance(error, ActivityError) and isinstance(error.cause, ApplicationError)
    assert error.cause.type == FORBIDDEN["expect"]["envelope"]["code"]
    order_run = [a.input[0] for a in history_activities(history)]
    assert order_run == ["/charge", "/reserve", "/ship", "/release", "/refund"]
    assert [r["path"] for r in shop.requests(order)] == order_run
    assert all(a.attempt == 1 for a in history_activities(history))


def test_a_failed_compensation_does_not_stop_the_others(
    server: DevServer, shop: Shop, quickstart: ModuleType
) -> None:
    order = f"o-{uuid.uuid4().hex[:8]}"
    shop.plan("/ship", order, as_response(FORBIDDEN))
    shop.plan("/release", order, as_response(DECLINE))
    history, error, _ = asyncio.run(checkout(server, quickstart, order))

    assert isinstance(error, ApplicationError) and error.type == "CompensationFailed"
    assert error.non_retryable is True
    (failed,) = error.details[0]
    assert failed["compensation"] == "post" and failed["type"] == "ActivityError"
    assert isinstance(error.cause, ActivityError)  # the step that failed: /ship
    assert isinstance(error.cause.cause, ApplicationError)
    assert error.cause.cause.type == FORBIDDEN["expect"]["envelope"]["code"]
    assert [a.input[0] for a in history_activities(history)][-2:] == ["/release", "/refund"]


def test_temporal_sees_the_activity_without_its_injected_parameters(quickstart: ModuleType) -> None:
    assert list(inspect.signature(quickstart.post).parameters) == ["path", "order"]
    with pytest.raises(PolicyError) as info:
        recover_activity(retries=3)(quickstart.post)
    assert info.value.kind == "invalid_argument" and "retries" in str(info.value)


def test_the_saga_runs_inside_the_workflow_sandbox(server: DevServer) -> None:
    from .temporal_sandboxed import SagaInSandbox

    async def run(failing: List[str]) -> Any:
        client = await Client.connect(server.address)
        queue = f"sandbox-{uuid.uuid4().hex}"
        async with Worker(client, task_queue=queue, workflows=[SagaInSandbox]):  # the default, sandboxed runner
            return await client.execute_workflow(
                SagaInSandbox.run, failing, id=queue, task_queue=queue, execution_timeout=timedelta(seconds=60)
            )

    clean, one_failed = asyncio.run(run([])), asyncio.run(run(["reserve"]))
    assert clean == {"ran": ["label", "reserve", "charge"], "failed": [], "cause": "ship: carrier refused", "pending": []}
    assert one_failed["ran"] == ["label", "reserve", "charge"]
    assert one_failed["failed"] == [
        {"compensation": "SagaInSandbox.undo", "error": "reserve could not be undone", "type": "ApplicationError"}
    ]
    assert one_failed["cause"] == "ship: carrier refused"


@activity.defn
@recover_activity(call="tool")
def charge_sync(path: str, order: str, *, key: str, attempt: int) -> Any:
    """A blocking activity (run on the worker's thread pool) with `requests`."""
    headers = {"Idempotency-Key": key, "X-Attempt": str(attempt)}
    r = requests.post(os.environ["SHOP_URL"] + path, json={"order": order}, headers=headers, timeout=30)
    r.raise_for_status()
    return r.json()


def test_a_blocking_activity_gets_the_key_and_the_attempt_number(server: DevServer, shop: Shop) -> None:
    from .temporal_sandboxed import ChargeOnce

    order = f"o-{uuid.uuid4().hex[:8]}"
    shop.plan("/charge", order, as_response(UNAVAILABLE))
    queue = f"sync-{uuid.uuid4().hex}"

    async def run() -> Tuple[Any, Any]:
        client = await Client.connect(server.address)
        with ThreadPoolExecutor(2) as pool:
            async with Worker(
                client, task_queue=queue, workflows=[ChargeOnce], activities=[charge_sync], activity_executor=pool
            ):
                result = await client.execute_workflow(
                    ChargeOnce.run, args=["charge_sync", order], id=queue, task_queue=queue,
                    execution_timeout=timedelta(seconds=60),
                )
        return result, await client.get_workflow_handle(queue).fetch_history()

    result, history = asyncio.run(run())
    assert result == {"ok": True}
    (charge,) = history_activities(history)
    assert charge.attempt == 2
    envelope, decision = failure_details(charge.last_failure)
    assert mismatches(UNAVAILABLE["expect"]["envelope"], envelope) == []
    assert decision["action"] == "retry"
    assert charge.last_failure.application_failure_info.next_retry_delay.ToTimedelta() == timedelta(
        milliseconds=decision["delay_ms"]
    )
    sent = shop.requests(order)
    assert [r["attempt"] for r in sent] == ["1", "2"]
    assert sent[0]["key"] == sent[1]["key"] == documented_key(queue, charge.activity_id, "charge_sync", charge.input)
