"""An agent run under the recovery Runtime: a fallback chain, a compensation,
a circuit breaker and a dead letter, on a virtual clock (nothing sleeps, no
network: the tools are simulated here; the runtime and the policy component
are the real ones).

    pip install ./python
    python examples/python/runtime_agent.py

The order agent reserves stock (a side effect with an undo), asks an LLM for
the customer reply (OpenAI is out of quota, so the chain falls back to
Anthropic), asks three carriers for a shipping quote at once (a fan-out: two
answers are enough, one carrier rejects the request), then charges the card on a payment API that keeps answering 503:
the policy retries, the breaker opens after 3 consecutive failures and
short-circuits the next call, the attempt budget runs out, the stock hold is
released (the compensation) and the input is written to the dead-letter
stream. A second order, a second later and with a 5 s deadline, finds the
breaker still open (the store is shared): it is not sent to the payment API
at all, since the probe would come after its deadline.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict

from agent_recovery import Call, Failed, RawOutcome, Runtime, VirtualClock
from agent_recovery.scenario import DEAD_LETTER_STREAM
from agent_recovery.store import MemoryStore

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, where the virtual clock starts


def show(event: Dict[str, Any]) -> None:
    """One timeline line per event."""
    extra = []
    for key in ("attempt", "call", "action", "code", "delay_ms", "state"):
        if key in event:
            extra.append(f"{key}={event[key]}")
    target = event.get("target") or "-"
    print(f"  {event['t_ms']:>7} ms  {event['event']:<13} {event['step']:<8} {target:<12} {' '.join(extra)}")


# -- the simulated tools ------------------------------------------------------------

holds: Dict[str, str] = {}


def reserve(call: Call) -> Any:
    holds[call.key[:12]] = "A-1 x1"
    return {"hold": "h_9"}


def release(call: Call) -> Any:
    print(f"  (compensation: releasing the hold, its own key {call.key[:12]}…)")
    holds.clear()
    return None


def chat(call: Call) -> Any:
    if call.target == "openai":  # the account is out of quota: a refusal, not a rate limit
        return RawOutcome({"source": "http", "status": 429, "provider": "openai", "body": {"error": {
            "type": "insufficient_quota", "code": "insufficient_quota",
            "message": "You exceeded your current quota"}}})
    return {"text": "Your order ships Monday."}


def quote(call: Call) -> Any:
    if call.target == "carrier-b":  # a 400: permanent, this branch fails at once
        return RawOutcome({"source": "http", "status": 400, "body": {"error": "unknown postcode"}})
    return {"carrier": call.target, "eur": 4.9 if call.target == "carrier-a" else 5.2}


def charge(call: Call) -> Any:
    return Failed({"source": "http", "status": 503, "headers": {"server": "api.pay"}})


def main() -> int:
    store = MemoryStore()  # SqliteStore("state.db") shares breakers between processes
    clock = VirtualClock(T0)  # SystemClock() (the default) really sleeps
    runtime = Runtime(
        store=store,
        clock=clock,
        seed=7,  # reproducible jitter
        # The run configuration (docs/runtime.md): 3 consecutive failures open a target
        # (its open window grows with the outage up to 30 s); on_open "wait" waits for
        # the probe instead of failing at once, so the payment ends dead-lettered.
        config={"breaker": {"failure_threshold": 3, "open_ms": 30_000}, "on_open": "wait"},
        on_event=show,
    )

    print("order-1042")
    run = runtime.run("order-1042")
    reserved = run.step(id="reserve", tool="inventory.reserve", operation=reserve, call="tool",
                        args={"sku": "A-1", "qty": 1}, side_effect=True, compensate=release)
    assert reserved.outcome == "ok"
    answer = run.step(id="answer", tool="llm.chat", operation=chat, call="llm",
                      target="openai", fallbacks=["anthropic"])
    assert answer.outcome == "ok"
    print(f"  -> reply from the fallback: {answer.result['text']}")
    quotes = run.fanout("quotes", 2, [
        dict(id=f"quote-{c}", tool="shipping.quote", call="tool", target=f"carrier-{c}", operation=quote)
        for c in "abc"
    ])
    assert quotes.outcome == "ok"
    cheapest = min((q for q in quotes.result if q is not None), key=lambda q: q["eur"])
    print(f"  -> {sum(q is not None for q in quotes.result)} of 3 quotes, cheapest {cheapest['carrier']}")
    charged = run.step(id="charge", tool="payments.charge", operation=charge, call="tool",
                       target="api.pay", args={"amount": 1999})
    print(f"  -> charge: {charged.outcome} ({charged.envelope['code']}); hold released: {not holds}")
    assert charged.outcome == "dead_lettered" and not holds

    clock.advance(1_000)
    print("order-1043, one second later")
    calls = []
    hurried = Runtime(store=store, clock=clock, seed=7, deadline_ms=5_000, on_event=show)
    run2 = hurried.run("order-1043")
    charged2 = run2.step(id="charge", tool="payments.charge", call="tool", target="api.pay",
                         operation=lambda c: calls.append(c) or charge(c), args={"amount": 500})
    print(f"  -> charge: {charged2.outcome}; calls to the payment API: {len(calls)}")
    # The defaults: the open window is short at first, so one probe goes out; it fails,
    # and the step then fails at once on the open breaker instead of sleeping.
    assert charged2.outcome == "failed" and len(calls) == 1
    assert charged2.envelope["code"] == "runtime.circuit.open"

    print("dead letters")
    for seq, record in store.read(DEAD_LETTER_STREAM, 0, 10):
        r = json.loads(record)
        print(f"  #{seq} run {r['run_id']} step {r['step_id']}: {r['attempts']} attempts, "
              f"last {r['last_envelope']['code']}, compensations {[c['outcome'] for c in r['compensations']]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
