"""The recovery runtime: carries out every decision, with the loop written once
in the component.

The loop (retries, fallbacks past open breakers, restores, compensations, dead
letters, budgets, the idempotency cache, fan-outs) is the reference component's
`agent:recovery/runtime@0.2.0` export, a sans-I/O state machine
(docs/runtime.md is its specification). This module only does I/O: it keeps
the run's state text, feeds the component what happened, calls your operation,
sleeps on a clock, asks the active policy to decide, reads and writes a store
and reports events. It never reads the state, never counts, never judges
whether an outcome failed. It is the twin of the Rust host's
`agent_recovery::runtime`: same options, same defaults, same events (the
component's bytes).

```python
from agent_recovery.runtime import Failed, Runtime, VirtualClock

clock = VirtualClock(1_767_225_600_000)
runtime = Runtime(clock=clock, seed=7)
run = runtime.run("run-1")

def charge(call):
    # call.key is the same on every attempt; call.target the target or a fallback
    if call.attempt == 1:
        return Failed({"source": "http", "status": 503})
    return {"id": "ch_1"}

report = run.step(id="charge", tool="payments.charge", operation=charge,
                  call="tool", args={"amount": 10})
assert report.outcome == "ok" and report.result == {"id": "ch_1"}
assert clock.now_ms() > 1_767_225_600_000  # slept on the virtual clock
```

`run.step` is blocking (operations are plain functions; a real sleep blocks
the thread); `await run.step_async(...)` takes sync or async operations and
sleeps with `asyncio.sleep`. Both run the same code (the driver `_drive` and
the executor `_carry`; only how they wait differs, `_IO`), so they cannot
differ.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
import threading
import time
import warnings
from collections.abc import Coroutine, Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, TypeGuard, TypeVar

from . import _decision_log, _offloop, _strict_json
from ._inputs import check_name, json_text
from ._keys import DEAD_LETTER_STREAM as _DEAD_LETTER_STREAM
from ._loop import LoopComponent
from .adapters import _is_a2a_proto, _names, _root, observation_from
from .errors import PolicyError, PolicyRuntimeError
from .limits import Limits
from .observe import Failure, _response_text, from_response
from .store import MemoryStore, StoreError, Written
from .telemetry import OFF_LANE, Telemetry, bind as _bind_telemetry
from .types import NAMED_RENDER_FORMATS

T = TypeVar("T")

__all__ = [
    "Call",
    "Clock",
    "Failed",
    "RawOutcome",
    "Run",
    "Runtime",
    "Step",
    "StepReport",
    "SystemClock",
    "VirtualClock",
]

# -- clocks ------------------------------------------------------------------------


class Clock:
    """Where the runtime reads the time and sleeps (integer Unix ms).

    Subclass it for your own clock: `now_ms()` and `sleep_ms(ms)` (blocking);
    `sleep_ms_async` defaults to `asyncio.sleep`.
    """

    def now_ms(self) -> int:
        """Now, Unix ms."""
        raise NotImplementedError

    def sleep_ms(self, ms: int) -> None:
        """Sleep `ms` milliseconds."""
        raise NotImplementedError

    async def sleep_ms_async(self, ms: int) -> None:
        """Sleep `ms` milliseconds without blocking the event loop."""
        await asyncio.sleep(ms / 1000)

    def is_virtual(self) -> bool:
        """A virtual clock (tests, scenarios): the branches of a fan-out then run
        one after another, each from the fork's time, so a run reproduces
        exactly; a timeout is only measured, never waited for. Default: False."""
        return False

    def set_ms(self, now_ms: int) -> None:
        """Set the time; called only when `is_virtual()`. Default: does nothing."""


class SystemClock(Clock):
    """The system clock; real sleeps (`time.sleep`, `asyncio.sleep`)."""

    def now_ms(self) -> int:
        """`time.time_ns() // 1_000_000`."""
        return time.time_ns() // 1_000_000

    def sleep_ms(self, ms: int) -> None:
        """`time.sleep(ms / 1000)`."""
        time.sleep(ms / 1000)


class VirtualClock(Clock):
    """A virtual clock: sleeping advances it at once, nothing really waits.

    >>> clock = VirtualClock(1_000)
    >>> clock.sleep_ms(250)
    >>> clock.now_ms()
    1250
    """

    def __init__(self, now_ms: int = 0) -> None:
        """A clock that starts at `now_ms`."""
        self._now = _uint(now_ms, "VirtualClock now_ms")
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        """The virtual time."""
        return self._now

    def advance(self, ms: int) -> None:
        """Move the clock forward without sleeping."""
        with self._lock:
            self._now += _uint(ms, "advance ms")

    def set_ms(self, now_ms: int) -> None:
        """Set the clock (a fan-out runs each branch from the fork's time)."""
        with self._lock:
            self._now = _uint(now_ms, "now_ms")

    def is_virtual(self) -> bool:
        """True."""
        return True

    def sleep_ms(self, ms: int) -> None:
        """Advance by `ms`."""
        self.advance(ms)

    async def sleep_ms_async(self, ms: int) -> None:
        """Advance by `ms` (and let other tasks run)."""
        self.advance(ms)
        await asyncio.sleep(0)


# -- what operations return ---------------------------------------------------------


class Failed:
    """Returned by an operation: this call failed with `observation` (a dict or
    JSON text in the observation format). Answered as `{"failed": observation}`:
    the policy decides on it as it is."""

    __slots__ = ("observation",)

    def __init__(self, observation: Any) -> None:
        self.observation = observation

    def __repr__(self) -> str:
        return f"Failed({self.observation!r})"


class RawOutcome:
    """Returned by an operation: a raw outcome (observation-shaped dict or JSON
    text) for the component to judge (`check-outcome`): a 200 carrying a refusal
    fails, a 304 succeeds. Answered as `{"response": outcome}`."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome

    def __repr__(self) -> str:
        return f"RawOutcome({self.outcome!r})"


#: The warning of `Response`, the former name of RawOutcome.
_RESPONSE_DEPRECATED = "agent_recovery: `Response` is deprecated, use `RawOutcome` (the same class)"

if TYPE_CHECKING:
    #: Deprecated: the former name of RawOutcome (reading it warns).
    Response = RawOutcome
else:

    def __getattr__(name: str) -> Any:
        if name == "Response":
            warnings.warn(_RESPONSE_DEPRECATED, DeprecationWarning, stacklevel=2)
            return RawOutcome
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Call:
    """One call the runtime makes: the operation on a target, a fallback
    target, or a compensation."""

    #: `operation`, `fallback` or `compensation`.
    kind: str
    #: The step id.
    step: str
    #: The target to call (the step's target, a fallback; for a compensation
    #: the target that succeeded).
    target: str
    #: The idempotency key: the same on every attempt of a step, on every target.
    key: str
    #: Call number of this key, from 1.
    attempt: int
    #: Give up after this long (the runtime reports a timeout); None: no limit.
    timeout_ms: Optional[int]
    #: Set when the run is cancelled (a long operation may stop early).
    cancelled: threading.Event


@dataclass(frozen=True)
class StepReport:
    """How a step ended, as the loop reported it (the `finish` effect)."""

    #: `ok`, `failed`, `escalated`, `replan`, `awaiting_input`,
    #: `dead_lettered`, `cancelled`, `in_flight`.
    outcome: str
    #: Every outcome but `ok` ends the run.
    run_finished: bool
    #: For `ok`: the operation's value (or the idempotency cache's). A fan-out's
    #: is a list with each branch's result (None where a branch did not end ok).
    result: Any = None
    #: The last failure's envelope (dict).
    envelope: Any = None
    #: For `replan`: the envelope rendered `model-tool-result`, for the model.
    rendered: Any = None
    #: For `awaiting_input`: run the step again with the answer (same key).
    token: Optional[str] = None


Operation = Callable[[Call], Any]

_STEP_OPTIONS = (
    "id",
    "tool",
    "operation",
    "call",
    "args",
    "target",
    "fallbacks",
    "side_effect",
    "idempotent",
    "compensate",
    "checkpoint",
)


class Step:
    """A step of a run (the options of Rust's `Step`).

    | option | default |
    | --- | --- |
    | `id`, `tool`, `operation` | required |
    | `call` | None: the kind (`tool`, `llm`, `agent`) is read from each observation |
    | `args` | None (JSON `null`); part of the idempotency key |
    | `target` | the tool name (the circuit key) |
    | `fallbacks` | none: targets to try next, in order |
    | `side_effect` | False |
    | `idempotent` | None (unknown) |
    | `compensate` | None: the undo of the side effect, `compensate(call)` |
    | `checkpoint` | None: the hook of `restore` decisions, `checkpoint() -> bool` |
    """

    __slots__ = _STEP_OPTIONS + ("_args_text",)

    def __init__(
        self,
        id: str,
        tool: str,
        operation: Operation,
        *,
        call: Optional[str] = None,
        args: Any = None,
        target: Optional[str] = None,
        fallbacks: Sequence[str] = (),
        side_effect: bool = False,
        idempotent: Optional[bool] = None,
        compensate: Optional[Operation] = None,
        checkpoint: Optional[Callable[[], Any]] = None,
    ) -> None:
        if not callable(operation):
            raise _bad(f"step {id!r}: `operation` is {type(operation).__name__}, not callable; pass a function")
        for name, hook in (("compensate", compensate), ("checkpoint", checkpoint)):
            if hook is not None and not callable(hook):
                raise _bad(f"step {id!r}: `{name}` is not callable; pass a function or None")
        if isinstance(fallbacks, str) or not all(isinstance(t, str) for t in fallbacks):
            raise _bad(f"step {id!r}: `fallbacks` must be a list of target names, got {fallbacks!r}")
        for member, value in (("step.id", id), ("step.tool", tool), ("step.target", target)):
            check_name(member, value)
        for fallback in fallbacks:
            check_name("step.fallbacks[]", fallback)
        self.id = id
        self.tool = tool
        self.operation = operation
        self.call = call
        self.args = args
        self.target = target
        self.fallbacks = list(fallbacks)
        self.side_effect = side_effect
        self.idempotent = idempotent
        self.compensate = compensate
        self.checkpoint = checkpoint
        self._args_text: Optional[str] = None

    def _with(self, operation: Operation, args: Any, args_text: Optional[str] = None) -> "Step":
        """This step with another operation and args (checked already: a door's
        steps differ only in these); `args_text`: the args as JSON text, when
        the caller has it."""
        step = object.__new__(Step)
        step._args_text = args_text
        step.id, step.tool, step.call, step.target = self.id, self.tool, self.call, self.target
        step.fallbacks, step.side_effect, step.idempotent = self.fallbacks, self.side_effect, self.idempotent
        step.compensate, step.checkpoint = self.compensate, self.checkpoint
        step.operation, step.args = operation, args
        return step

    @classmethod
    def of(cls, step: Any = None, options: Optional[Dict[str, Any]] = None) -> "Step":
        """A `Step`, or one built from keyword options (unknown ones are refused)."""
        options = options or {}
        if step is not None:
            if options:
                raise _bad("pass a Step or keyword options, not both")
            if isinstance(step, Step):
                return step
            if isinstance(step, dict):
                options = step
            else:
                raise _bad(f"a step is a Step or a dict of options, got {type(step).__name__}")
        unknown = sorted(set(options) - set(_STEP_OPTIONS))
        if unknown:
            raise _bad(
                f"unknown step option(s) {', '.join(unknown)}; the options are {', '.join(_STEP_OPTIONS)}"
            )
        missing = [k for k in ("id", "tool", "operation") if k not in options]
        if missing:
            raise _bad(f"a step needs {', '.join(missing)}; see Step")
        return cls(**options)

    def spec_text(self) -> str:
        """`spec()` as the JSON text the loop reads: `_dumps(spec(), "step")`,
        written directly when every field has its plain type (the same bytes;
        anything else, or a lone surrogate in a name, takes `_dumps`, which
        names what it cannot carry)."""
        call, target, fallbacks, idempotent = self.call, self.target, self.fallbacks, self.idempotent
        if (
            type(self.id) is str
            and type(self.tool) is str
            and (call is None or type(call) is str)
            and (target is None or type(target) is str)
            and type(self.side_effect) is bool
            and (idempotent is None or type(idempotent) is bool)
            and type(fallbacks) is list
            and all(type(f) is str for f in fallbacks)
        ):
            try:
                "".join((self.id, self.tool, call or "", target or "", *fallbacks)).encode("utf-8")
            except UnicodeEncodeError:
                return _dumps(self.spec(), "step")
            args = self._args_text or ("null" if self.args is None else _dumps(self.args, "step.args"))
            return (
                f'{{"id":{_jstr(self.id)},"tool":{_jstr(self.tool)},'
                f'"call":{"null" if call is None else _jstr(call)},"args":{args},'
                f'"target":{"null" if target is None else _jstr(target)},'
                f'"fallbacks":[{",".join(map(_jstr, fallbacks))}],'
                f'"side_effect":{_jbool(self.side_effect)},'
                f'"compensation":{_jbool(self.compensate is not None)},'
                f'"checkpoint":{_jbool(self.checkpoint is not None)},'
                f'"idempotent":{"null" if idempotent is None else _jbool(idempotent)}}}'
            )
        return _dumps(self.spec(), "step")

    def spec(self) -> Dict[str, Any]:
        """The `step` member of the loop's `step` input."""
        return {
            "id": self.id,
            "tool": self.tool,
            "call": self.call,
            "args": self.args,
            "target": self.target,
            "fallbacks": self.fallbacks,
            "side_effect": self.side_effect,
            "compensation": self.compensate is not None,
            "checkpoint": self.checkpoint is not None,
            "idempotent": self.idempotent,
        }


class _Fanout:
    """The steps of a fan-out, by id."""

    def __init__(self, id: str, min_results: int, branches: Sequence[Any]) -> None:
        if isinstance(branches, (str, bytes)) or not isinstance(branches, Sequence):
            raise _bad(f"fan-out {id!r}: `branches` must be a list of steps")
        check_name("fanout.id", id)
        self.id = id
        self.min_results = min_results
        self.branches = [Step.of(b) for b in branches]
        self.by_id: Dict[str, Step] = {}
        for b in self.branches:
            self.by_id.setdefault(b.id, b)

    def spec(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "min_results": self.min_results,
            "branches": [b.spec() for b in self.branches],
        }


# -- helpers ---------------------------------------------------------------------


def _bad(message: str) -> PolicyError:
    return PolicyError("invalid_argument", message)


def _uint(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**53 - 1:
        raise _bad(f"{what} must be an integer from 0 to 2^53 - 1, got {value!r}")
    return value


def _dumps(value: Any, root: str = "value") -> str:
    """JSON text that carries `value` exactly, or `JsonValueError` naming the
    path of what it cannot carry (NaN, a huge integer, colliding keys...)."""
    return _strict_json.dumps(value, root)


#: A str as JSON text, as `json.dumps(s, ensure_ascii=False)` writes it (the
#: encoder's own C function, without building an encoder per call).
_jstr: Callable[[str], str] = json.encoder.encode_basestring


#: What every `read` answer says: this runtime stops a batch at a `claim`
#: that fails (answering `claimed`), so the loop may put a step's call in its
#: claim's batch (docs/runtime.md, "A claim in the call's batch").
_STOPS = '"claim_stops_batch":true'
#: What every step input says: this runtime stops a batch at a `read` marked
#: `go_on_if_absent` that found a value (answering `read`), so the loop may
#: send a step's first read with its call.
_READ_STOPS = '"read_stops_batch":true,"step":'


def _jbool(b: bool) -> str:
    return "true" if b else "false"


def _malformed(what: str) -> PolicyRuntimeError:
    return PolicyRuntimeError(
        "invalid_output",
        f"the recovery loop emitted a malformed effect ({what[:200]}); this is a bug, please report it",
    )


_WS = re.compile(r"[ \t\n\r]*")
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
#: Effect members whose exact bytes the runtime passes on (events, records, values).
_RAW = ("event", "value", "record")
_SPACE = " \t\n\r"
#: Where an effect's kind starts in `{"effect":"<kind>"`.
_KIND_AT = len('{"effect":"')
#: The raw members of an effect that has none (never written to).
_NO_RAW: Dict[str, str] = {}


def _skip(text: str, i: int) -> int:
    """`i` past any JSON whitespace (the component writes none: the callers
    look at the next character first and call this only for a space)."""
    return _WS.match(text, i).end()  # type: ignore[union-attr]


def _effects(text: str, state: str = "") -> List[Tuple[Dict[str, Any], Dict[str, str]]]:
    """The effects array, each effect parsed, with the raw text of its
    `event`, `value` and `record` (the component's bytes, passed on unchanged).

    `state`: the state text `advance` returned with the batch. A journal
    entry's `state` member is that text (less the `end_after_step` member),
    found with one comparison and jumped over rather than parsed: such a
    `value` is then only in the raw members, as every value the runtime only
    passes on may be (a `write`'s, a `claim`'s, an `append`'s record)."""
    out: List[Tuple[Dict[str, Any], Dict[str, str]]] = []
    try:
        i = _skip(text, 0) if text[0] in _SPACE else 0
        if text[i] != "[":
            raise _malformed("not an array")
        i += 1
        if text[i] in _SPACE:
            i = _skip(text, i)
        if text[i] == "]":
            return out
        while True:
            if text[i] != "{":
                raise _malformed(text[i : i + 200])
            if text.startswith('{"effect":"', i):
                kind = text[i + _KIND_AT : text.index('"', i + _KIND_AT)]
                template = _TEMPLATES.get(kind)
                if template is None:
                    # A kind without a raw member: one scan.
                    fx, end = _scan(text, i)
                    if "event" in fx or "value" in fx or "record" in fx:  # after all: read again
                        fx, raw, i = _members(text, i)
                    else:
                        raw, i = _NO_RAW, end
                else:
                    got = _templated(text, i + _KIND_AT + len(kind) + 1, kind, template, state)
                    if got is None:
                        fx, raw, i = _members(text, i)
                    else:
                        fx, raw, i = got
            else:
                fx, raw, i = _members(text, i)
            out.append((fx, raw))
            c = text[i]
            if c in _SPACE:
                i = _skip(text, i)
                c = text[i]
            if c == ",":
                i += 1
                if text[i] in _SPACE:
                    i = _skip(text, i)
                continue
            if c == "]":
                return out
            raise _malformed(text[i:])
    except (IndexError, StopIteration, ValueError):
        raise _malformed(text) from None


#: The members of each effect that carries a raw one, in the order the
#: component writes them after `{"effect":"<kind>"` (as `,"<name>":`). An
#: effect written otherwise (another order, whitespace, another member) is
#: read member by member (`_members`); the members a template reads must be a
#: prefix of its list (the rest absent).
_TEMPLATES: Dict[str, Tuple[Tuple[str, str], ...]] = {
    kind: tuple((name, f',"{name}":') for name in names)
    for kind, names in (
        ("emit", ("event",)),
        ("write", ("key", "value", "ttl_ms")),
        ("claim", ("key", "value", "ttl_ms")),
        ("swap", ("key", "expected", "value", "ttl_ms")),
        ("append", ("stream", "record", "depth_threshold")),
    )
}
#: The tail of a state text whose run ends after its step; a journal entry
#: holds the state without it (the component's `END_AFTER_STEP_TAIL`).
_END_AFTER_STEP_TAIL = ',"end_after_step":true}'


def _templated(
    text: str, i: int, kind: str, template: Tuple[Tuple[str, str], ...], state: str
) -> Optional[Tuple[Dict[str, Any], Dict[str, str], int]]:
    """The effect whose `{"effect":"<kind>"` ends at `text[i]`, read as
    `_members` reads it when its members are written as `template` lists them
    (no whitespace): each value scanned once, without a member name to scan
    or a separator to look for; None when they are not (then `_members`)."""
    fx: Dict[str, Any] = {"effect": kind}
    raw: Dict[str, str] = {}
    for name, lit in template:
        if not text.startswith(lit, i):
            break
        v = i + len(lit)
        if name in _RAW:
            end = _journal_end(text, v, state) if state and kind == "write" else 0
            if end:
                i = end
            else:
                fx[name], i = _scan(text, v)
            raw[name] = text[v:i]
        else:
            fx[name], i = _scan(text, v)
    if text[i] != "}":
        return None
    return fx, raw, i + 1


def _journal_end(text: str, v: int, state: str) -> int:
    """Where a journal entry (`{"run_id":..,"state":..,"v":..,"written_ms":..}`)
    that starts at `text[v]` ends, when its state is `state` (the component's
    state text, a complete JSON object: jumped over, not parsed) or `state`
    less its `end_after_step` member; else 0."""
    if not text.startswith('{"run_id":', v):
        return 0
    _, i = _scan(text, v + 10)
    if not text.startswith(',"state":', i):
        return 0
    i += 9
    if text.startswith(state, i):
        i += len(state)
    elif (
        state.endswith(_END_AFTER_STEP_TAIL)
        and text.startswith(state[: -len(_END_AFTER_STEP_TAIL)], i)
        and text.startswith("}", i + len(state) - len(_END_AFTER_STEP_TAIL))
    ):
        i += len(state) - len(_END_AFTER_STEP_TAIL) + 1
    else:
        return 0
    if not text.startswith(',"v":', i):
        return 0
    _, i = _scan(text, i + 5)
    if not text.startswith(',"written_ms":', i):
        return 0
    _, i = _scan(text, i + 14)
    return i + 1 if text[i] == "}" else 0


def _members(text: str, start: int, raws: Tuple[str, ...] = _RAW) -> Tuple[Dict[str, Any], Dict[str, str], int]:
    """The object at `text[start]` (a `{`) read member by member, so each
    value is scanned once and the text of a raw member (one of `raws`) is
    the slice it was scanned from; its raw members; its end. It reads what
    `json.loads` reads (a repeated member: the last one)."""
    fx: Dict[str, Any] = {}
    raw: Dict[str, str] = {}
    i = start + 1
    if text[i] in _SPACE:
        i = _skip(text, i)
    if text[i] == "}":
        return fx, raw, i + 1
    while True:
        if text[i] != '"':
            raise _malformed(text[start : start + 200])
        key, i = _scan(text, i)
        if text[i] != ":":
            i = _skip(text, i)
            if text[i] != ":":
                raise _malformed(text[start : start + 200])
        v = i + 1
        if text[v] in _SPACE:
            v = _skip(text, v)
        value, i = _scan(text, v)
        fx[key] = value
        if key in raws:
            raw[key] = text[v:i]
        c = text[i]
        if c in _SPACE:
            i = _skip(text, i)
            c = text[i]
        if c == ",":
            i += 1
            if text[i] in _SPACE:
                i = _skip(text, i)
            continue
        if c == "}":
            return fx, raw, i + 1
        raise _malformed(text[start : start + 200])


def _observation_text(obs: Any) -> str:
    """An observation as JSON text; one JSON cannot carry (text that is not
    JSON, NaN, a cycle...) is reported as an exception rather than breaking the
    run (as in Rust). A lone surrogate in its text becomes U+FFFD; whether the
    observation is one the loop can use is the loop's call."""
    if isinstance(obs, (bytes, bytearray)):
        obs = bytes(obs).decode("utf-8", "replace")
    if isinstance(obs, str):
        try:
            obs = json.loads(obs)
        except (ValueError, RecursionError):
            return _invalid_observation("the operation returned an observation that is not JSON: " + obs[:200])
    try:
        return _strict_json.dumps(obs, "observation", default=str, scrub=True)
    except Exception as e:  # noqa: BLE001 - a hostile `__str__` too
        return _invalid_observation(f"the operation returned an observation JSON cannot carry: {e}")


def _invalid_observation(message: str) -> str:
    return _strict_json.dumps(
        {"source": "exception", "type": "agent_recovery.InvalidObservation", "message": message},
        scrub=True,
    )


_UNSET = object()


def _sdk_outcome(value: Any) -> Optional[Any]:
    """The raw outcome of an SDK result or HTTP response object, for the
    component to judge; None for a plain value."""
    try:
        if isinstance(value, (dict, list, str, int, float, bool)) or value is None:
            return None
        root = _root(type(value))
        if "CallToolResult" in _names(value) and root in ("mcp", "mcp_types"):
            return observation_from(value)
        if root == "a2a" or _is_a2a_proto(value):
            return observation_from(value)
        status = getattr(value, "status_code", None)
        if isinstance(status, int) and not isinstance(status, bool) and hasattr(value, "headers"):
            return from_response(status, value.headers, _response_text(value))
    except Exception:  # a hostile object: treat it as a plain value
        return None
    return None


def _result_of(value: Any) -> Tuple[str, Any]:
    """(the `attempt` input's `result` text, the Python value to report when the
    JSON cannot carry it). `value` is what the operation returned."""
    if isinstance(value, Failed):
        return '{"failed":' + _observation_text(value.observation) + "}", _UNSET
    if isinstance(value, Failure):
        return '{"failed":' + _observation_text(value.observation) + "}", _UNSET
    if isinstance(value, RawOutcome):
        return '{"response":' + _observation_text(value.outcome) + "}", _UNSET
    sdk = _sdk_outcome(value)
    if sdk is not None:
        return '{"response":' + _observation_text(sdk) + "}", value
    try:
        return '{"ok":' + _dumps(value, "result") + "}", _UNSET
    except Exception:  # noqa: BLE001 - NaN, a huge int, a hostile `__str__`...
        return '{"ok":null}', value  # the cache records null; the report carries the object


def _failed_exception(exc: BaseException) -> str:
    return '{"failed":' + _observation_text(observation_from(exc)) + "}"


def _unknown_tool(_call: Any) -> Any:
    """The operation of a tool `recover` or a replay has no operations for
    (`durable.Operations`): never called; the runtime answers its calls
    `unknown_tool` and the loop makes the `runtime.recover.unknown_tool`
    failure (docs/runtime.md)."""
    raise AssertionError("unknown_tool is answered by the loop, not called")


class _Holder:
    """A lane: the state text of a run or of a fan-out branch, its events
    (a branch's join the run's in branch order, as in Rust), and the Python
    value of its last successful call (when JSON could not carry it)."""

    __slots__ = ("state", "value", "events", "tel")

    def __init__(self, state: str, events: Optional[List[str]] = None) -> None:
        self.state = state
        self.value: Any = _UNSET
        self.events: List[str] = events if events is not None else []
        self.tel: Any = OFF_LANE  # the lane's telemetry (telemetry.py)


# -- the runtime -------------------------------------------------------------------

_DEFAULTS_LOCK = threading.Lock()
_DEFAULT_LOOPS: Dict[Limits, LoopComponent] = {}
_DEFAULT_POLICY: List[Any] = []


def _default_loop(limits: Limits) -> LoopComponent:
    with _DEFAULTS_LOCK:
        loop = _DEFAULT_LOOPS.get(limits)
        if loop is None:
            loop = _DEFAULT_LOOPS[limits] = LoopComponent(None, limits)
        return loop


def _default_policy() -> Any:
    from .policy import Policy

    with _DEFAULTS_LOCK:
        if not _DEFAULT_POLICY:
            _DEFAULT_POLICY.append(Policy.load())
        return _DEFAULT_POLICY[0]


def _render_by(policy: Any, envelope: Any, format: str, options: Any = None) -> Any:
    """`envelope` rendered by `policy`, or by the reference when it cannot render."""
    renderer = getattr(policy, "render", None)
    if not callable(renderer):
        renderer = _default_policy().render
    return renderer(envelope, format, options)


class Runtime:
    """Runs steps under the recovery loop. Build it once and share it (thread-safe).

    | option | default |
    | --- | --- |
    | `policy` | the packaged reference decides; any `Policy`, a `PolicyHandle` (hot swap: the next decision uses the new policy) or any object with `decide_json(observation, context)` |
    | `store` | a fresh `MemoryStore`; any store, e.g. `open_store("state.db")` or `open_store("redis://host:6379/0")` |
    | `clock` | `SystemClock()` (real time, real sleeps); on a store with `server_clock()` (opened from a redis:// URL), that clock: the Redis server's time |
    | `seed` | None: jitter drawn from WASI random |
    | `attempt_budget` | 5 calls per idempotency key, persisted |
    | `breaker` | the policy's thresholds (the reference's: 3 consecutive transient failures open a target, for a window of 250 ms that grows with the outage up to 30 000 ms); when set, a `(failure_threshold, open_ms)` pair or a dict with those keys, it wins over the policy's |
    | `idempotency_ttl_ms` | 86 400 000 (24 h) |
    | `in_flight_ttl_ms` | 300 000 (5 min) |
    | `in_flight_wait_ms` | 0: a step whose key is in flight elsewhere ends `in_flight` at once; > 0: it waits up to this long, re-reading the key every 250 ms at most |
    | `attempt_timeout_ms` | None |
    | `deadline_ms` | None |
    | `policy_config` | None: the policy's defaults (run retry budget 60 000 ms) |
    | `journal` | True: the loop journals each run before every side effect, so `recover` can finish it (docs/durability.md) |
    | `dead_letter` | None: `{"owner", "runbook", "depth_threshold"}` (each default None): written into every dead-letter record; the `dead_letter_depth` event when the queue's depth crosses `depth_threshold` |
    | `retry_quota` | None (off): the fleet retry quota, a dict `{"name", "capacity", "retry_cost", "timeout_cost", "success_refund"}` (defaults `"default"`, 500, 5, 10, 1): a token bucket in the store that every retry takes from and every success refills (docs/runtime.md) |
    | `config` | None: the whole run configuration as a dict (docs/runtime.md); replaces the typed options above |
    | `on_event` | None: called with each event (a dict), and with its JSON text too when it takes two arguments; also gets the store's `store_degraded` / `store_restored` events when the store has `subscribe` (a `FallbackStore`) |
    | `limits` | `Limits()` for the loop component |
    | `telemetry` | `Telemetry.global_()`: spans and metrics to the global OpenTelemetry providers (no-ops until an SDK is installed); `Telemetry(tracer_provider=, meter_provider=)`, `Telemetry.off()` (docs/telemetry.md) |
    | `decision_log` | None (off): log every decision, one JSON line each, to a file path, a callable taking each line, or a `logging.Logger` (docs/decision-logs.md) |
    | `decision_log_observation` | `"full"`: each line carries the observation (replayable); `"digest"`: only its sha256 |
    | `decision_log_max_record_bytes` | None: 65 536; the largest line (at least 16 384): a longer one drops its observation, keeping its digest |

    Unknown options raise `PolicyError` (`invalid_argument`).
    """

    def __init__(
        self,
        *,
        policy: Any = None,
        store: Any = None,
        clock: Optional[Clock] = None,
        seed: Optional[int] = None,
        attempt_budget: Optional[int] = None,
        breaker: Any = None,
        idempotency_ttl_ms: Optional[int] = None,
        in_flight_ttl_ms: Optional[int] = None,
        in_flight_wait_ms: Optional[int] = None,
        attempt_timeout_ms: Optional[int] = None,
        deadline_ms: Optional[int] = None,
        policy_config: Any = None,
        journal: Optional[bool] = None,
        dead_letter: Any = None,
        retry_quota: Any = None,
        config: Any = None,
        on_event: Optional[Callable[..., Any]] = None,
        limits: Optional[Limits] = None,
        telemetry: Optional[Telemetry] = None,
        decision_log: Any = None,
        decision_log_observation: str = "full",
        decision_log_max_record_bytes: Optional[int] = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise _bad(
                f"unknown Runtime option(s) {', '.join(sorted(unknown))}; see Runtime for the options"
            )
        typed: Dict[str, Any] = {}
        for name, value in (
            ("attempt_budget", attempt_budget),
            ("idempotency_ttl_ms", idempotency_ttl_ms),
            ("in_flight_ttl_ms", in_flight_ttl_ms),
            ("in_flight_wait_ms", in_flight_wait_ms),
            ("attempt_timeout_ms", attempt_timeout_ms),
            ("deadline_ms", deadline_ms),
        ):
            if value is not None:
                typed[name] = _uint(value, name)
        if breaker is not None:
            if isinstance(breaker, dict):
                unknown_b = set(breaker) - {"failure_threshold", "open_ms"}
                if unknown_b or len(breaker) != 2:
                    raise _bad(f"breaker must have failure_threshold and open_ms, got {sorted(breaker)}")
                pair = (breaker["failure_threshold"], breaker["open_ms"])
            elif isinstance(breaker, (tuple, list)) and len(breaker) == 2:
                pair = (breaker[0], breaker[1])
            else:
                raise _bad(f"breaker is a (failure_threshold, open_ms) pair, got {breaker!r}")
            typed["breaker"] = {
                "failure_threshold": _uint(pair[0], "breaker failure_threshold"),
                "open_ms": _uint(pair[1], "breaker open_ms"),
            }
        if policy_config is not None:
            typed["policy"] = policy_config
        if journal is not None:
            if not isinstance(journal, bool):
                raise _bad(f"journal must be True or False, got {journal!r}")
            typed["journal"] = journal
        if dead_letter is not None:
            if not isinstance(dead_letter, dict):
                raise _bad(
                    f"dead_letter is a dict with owner, runbook and depth_threshold, got {type(dead_letter).__name__}"
                )
            typed["dead_letter"] = dead_letter
        if retry_quota is not None:
            if not isinstance(retry_quota, dict):
                raise _bad(
                    "retry_quota is a dict with name, capacity, retry_cost, timeout_cost and success_refund "
                    f"(each optional), got {type(retry_quota).__name__}"
                )
            typed["retry_quota"] = retry_quota
        if config is not None and not isinstance(config, (dict, str)):
            raise _bad(f"config is the run configuration as a dict (or JSON text), got {type(config).__name__}")
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
                raise _bad(f"seed must be an integer from 0 to 2^64 - 1, got {seed!r}")
        if policy is not None and not callable(getattr(policy, "decide_json", None)):
            raise _bad("policy must be a Policy, a PolicyHandle or have decide_json(observation, context)")
        if clock is not None and not (
            callable(getattr(clock, "now_ms", None)) and callable(getattr(clock, "sleep_ms", None))
        ):
            raise _bad("clock must have now_ms() and sleep_ms(ms); use SystemClock or VirtualClock")
        try:
            raw = config if isinstance(config, str) else _dumps(config if config is not None else typed)
        except (TypeError, ValueError) as e:
            raise _bad(f"the run configuration cannot be written as JSON ({e})") from None
        self._decider = policy if policy is not None else _default_policy()
        self._decision_log = _decision_log.make(
            decision_log, self._decider, decision_log_observation, decision_log_max_record_bytes
        )
        if self._decision_log is not None:
            # The run configuration's `decision_log` member: the loop writes the lines.
            body = raw.strip()
            if not (body.startswith("{") and body.endswith("}")):
                raise _bad("config must be a JSON object to add decision_log to it")
            inner = body[1:-1].strip()
            raw = "{" + inner + ("," if inner else "") + '"decision_log":' + self._decision_log.config + "}"
        self._config = raw
        #: The loop accepted the configuration (a run started).
        self._config_checked = False
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        #: The run configuration, parsed (durability reads `in_flight_ttl_ms`, `dead_letter`).
        self._config_dict: Dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        self._limits = limits or Limits()
        self._looper = _default_loop(self._limits)
        self._telemetry = _bind_telemetry(telemetry, self._decider, self._looper)
        self._store = store if store is not None else MemoryStore()
        self._ops = _StoreOps(self._store)
        # A store opened from a redis:// URL brings the server's clock, so
        # breaker times, leases and TTLs agree across workers (docs/store.md).
        server_clock = getattr(self._store, "server_clock", None)
        if clock is None and callable(server_clock):
            clock = server_clock()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._seed = seed
        self._on_event = on_event
        self._event_text = False
        if on_event is not None:
            if not callable(on_event):
                raise _bad("on_event must be callable")
            try:
                params = [
                    p
                    for p in inspect.signature(on_event).parameters.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
                ]
                self._event_text = len(params) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)
            except (TypeError, ValueError):
                self._event_text = False
        # A FallbackStore's store_degraded / store_restored events reach on_event too.
        subscribe = getattr(self._store, "subscribe", None)
        if on_event is not None and callable(subscribe):
            from .redis_store import _weak_listener

            subscribe(_weak_listener(self, "_store_event"))
        # Check the configuration now, not at the first step (once per configuration).
        self._looper.check_config(self._config, lambda: self._run_input("config-check"))

    def _sibling(self, store: Any, clock: Clock) -> "Runtime":
        """This runtime on `store` and `clock`, sharing everything else (the
        checked configuration, the decider, the loop, telemetry), none of which
        a run changes: for a caller that would build the same runtime for every
        call on a fresh store (`retry`). `store` must bring no clock and no
        events of its own (a `MemoryStore`): those are wired only in `__init__`."""
        sibling = object.__new__(Runtime)
        sibling.__dict__.update(self.__dict__)
        sibling._store = store
        sibling._ops = _StoreOps(store)
        sibling._clock = clock
        return sibling

    def _store_event(self, text: str, event: Any = None) -> None:
        """Give `on_event` an event (JSON text; `event`: the same parsed, when
        the caller has it): a store's event, the loop's, a runtime's."""
        if self._on_event is None:
            return
        if event is None:
            event = json.loads(text)
        if self._event_text:
            self._on_event(event, text)
        else:
            self._on_event(event)

    @property
    def store(self) -> Any:
        """The store (breakers, attempt counts, the idempotency cache, dead letters)."""
        return self._store

    @property
    def clock(self) -> Clock:
        """The clock the runtime reads and sleeps on."""
        return self._clock

    @property
    def decision_log(self) -> Optional["_decision_log.DecisionLog"]:
        """The decision log (docs/decision-logs.md), or None when off; its
        `failed_writes` counts the lines a file could not take."""
        return self._decision_log

    def _run_input(self, run_id: str, started_ms: Optional[int] = None) -> str:
        """The `run` input; `started_ms`: when the run started, if before now
        (its input sent with its first step, docs/runtime.md, "Inputs")."""
        seed = "null" if self._seed is None else str(self._seed)
        now = self._clock.now_ms()
        started = f',"started_ms":{started_ms}' if started_ms is not None and started_ms != now else ""
        return (
            f'{{"input":"run","now_ms":{now}{started},"run_id":{_jstr(run_id)},'
            f'"seed":{seed},"config":{self._config}}}'
        )

    def run(self, run_id: str, *, signal: Optional[threading.Event] = None) -> "Run":
        """Start a run. Its retry budget, compensations and cancellation span its
        steps; breakers, attempt counts and the idempotency cache live in the
        store and span runs. `signal`: a `threading.Event` that cancels the run
        when set (from any thread); `run.cancelled` is that event."""
        if self._config_checked and run_id:
            # The `run` input goes with the first step (one loop call fewer),
            # carrying the time the run started.
            return self._run_with_first_step(run_id, signal, self._clock.now_ms())
        run = self._run_with_first_step(run_id, signal)
        # The first run checks the configuration (a refused one fails here).
        run._started()
        self._config_checked = True
        return run

    def _run_with_first_step(
        self, run_id: str, signal: Optional[threading.Event] = None, started_ms: Optional[int] = None
    ) -> "Run":
        """`run`, its `run` input sent with its first step (docs/runtime.md,
        "Inputs"): one `advance` for both (a door's run of one step); before
        any other input, alone. `started_ms`: when the run started, if before
        that input."""
        if not isinstance(run_id, str):
            raise _bad(f"run_id must be a string, got {type(run_id).__name__}")
        check_name("run_id", run_id)
        run = Run(self, "", signal, run_id)
        run._unstarted, run._started_ms = run_id, started_ms
        return run

    @property
    def dead_letters(self) -> Any:
        """The dead-letter queue of this runtime's store
        (`agent_recovery.deadletters.DeadLetters`): list, show, replay,
        request_replay, purge, depth."""
        from .deadletters import DeadLetters

        return DeadLetters(self)

    def recover(self, operations: Any, older_than_ms: Optional[int] = None) -> List[Any]:
        """Finish the store's interrupted runs and carry out the pending replay
        requests (`agent_recovery.durable.recover`): `operations` maps tool names
        to `{"operation", "compensate"?, "checkpoint"?}`; entries younger than
        `older_than_ms` (default `in_flight_ttl_ms`) are left to their worker.
        Returns one `RecoverReport` per run."""
        from .durable import recover

        return recover(self, operations, older_than_ms)

    async def recover_async(self, operations: Any, older_than_ms: Optional[int] = None) -> List[Any]:
        """`recover` for asyncio (operations may be async)."""
        from .durable import recover_async

        return await recover_async(self, operations, older_than_ms)

    def render(self, envelope: Any, format: str = "model-tool-result", options: Any = None) -> Any:
        """An envelope (a step report's `envelope`) rendered for a boundary by
        the active policy (the reference when the policy cannot render).

        The default, `model-tool-result`, is what a model reads as a failed
        tool's result: the code, the message, whether to retry and the hint,
        without the envelope's empty members. The formats: `Policy.render`,
        and `ag-ui-run-error` (an AG-UI `RUN_ERROR` event), which is not in the
        0.1 contract and is rendered by the reference component's
        `render-named`.
        """
        fmt = str(format).replace("_", "-")
        if fmt in NAMED_RENDER_FORMATS:
            text = self._looper.render_named(
                json_text(envelope, "envelope").decode(),
                fmt,
                json_text(options, "options", empty=b"").decode(),
            )
            return json.loads(text)
        renderer = self._decider if callable(getattr(self._decider, "render", None)) else _default_policy()
        return renderer.render(envelope, format, options)

    def check_outcome(self, outcome: Any) -> Optional[Dict[str, Any]]:
        """Was this outcome (an observation-shaped dict or JSON text) a failure?
        The failure's envelope, or None for a success. The component decides: a
        200 carrying a refusal is a failure, a 304 is not."""
        text = self.check_outcome_json(outcome if isinstance(outcome, str) else _observation_text(outcome))
        return None if text is None else json.loads(text)

    def check_outcome_json(self, outcome: str) -> Optional[str]:
        """`check-outcome` with the component's bytes: the envelope text, or None."""
        return self._looper.check_outcome(outcome)


#: A need of the driver: ("sleep", ms, cancellable), ("restore", hook),
#: ("call", Call, fn, holder), ("fork", fx, fanout, lane), ("store", fn, *args)
#: (store work: `fn(*args)`, answered with its value), ("log", write, line)
#: (a decision log line).
_Need = Tuple[Any, ...]


class Run:
    """A run of steps under one run id. Create it with `Runtime.run`."""

    def __init__(self, rt: Runtime, state: str, signal: Optional[threading.Event], run_id: str = "") -> None:
        self._rt = rt
        self._tel = rt._telemetry.run(run_id)
        self._events: List[str] = []
        self._holder = _Holder(state, self._events)
        self._undo: Dict[str, Operation] = {}
        self._ids: Set[str] = set()
        #: Set to cancel the run: no new attempts, compensations still run,
        #: the outcome is `cancelled`.
        self.cancelled = signal if signal is not None else threading.Event()
        self._cancel_at: Optional[int] = None
        self._finished: Optional[str] = None
        self._busy = False
        self._async_wake: Optional[Tuple[asyncio.AbstractEventLoop, asyncio.Event]] = None
        #: Durability (agent_recovery.durable): the operations by tool of a
        #: recovered or replayed run, the last `finish` effect, the ids of the
        #: dead-letter records this run appended.
        self._ops: Any = None
        self._last_finish: Optional[Dict[str, Any]] = None
        self._dead_letter_ids: List[int] = []
        self._tools: Dict[str, str] = {}
        #: A scenario's `kill_after_calls` (the calls so far, N).
        self._calls = 0
        self._kill_after: Optional[int] = None
        #: The run id while the `run` input is still to be sent (it goes with
        #: the first step, `Runtime._run_with_first_step`).
        self._unstarted: Optional[str] = None
        #: When the run started, for a `run` input sent later (`Runtime.run`).
        self._started_ms: Optional[int] = None

    # -- public ---------------------------------------------------------------

    @property
    def events(self) -> List[str]:
        """Every event so far, the component's JSON text (docs/runtime.md, "Events")."""
        return list(self._events)

    @property
    def state(self) -> str:
        """The run's state as the loop returned it (JSON text; do not edit)."""
        self._started()
        return self._holder.state

    def cancel_at(self, now_ms: int) -> None:
        """Cancel when the clock reaches `now_ms` (Unix ms); a sleep crossing it is cut short there."""
        self._cancel_at = _uint(now_ms, "cancel_at now_ms")

    def step(self, step: Any = None, /, **options: Any) -> StepReport:
        """Run a step to its end (blocking) and report how it ended. Takes a
        `Step` or its options as keywords. Raises only when the loop, the policy
        or the store failed (`PolicyError`, `PolicyRuntimeError`, `StoreError`)."""
        return self._sync(*self._step_of(step, options))

    async def step_async(self, step: Any = None, /, **options: Any) -> StepReport:
        """`step` for asyncio: operations, compensations and checkpoint hooks may
        be async; sleeps do not block the loop; `attempt_timeout_ms` cancels a
        slow async call on a real clock. Cancelling the task cancels the run
        (the report says `cancelled`, after the compensations)."""
        return await self._async(*self._step_of(step, options))

    def fanout(self, id: str, min_results: int, branches: Sequence[Any]) -> StepReport:
        """Run `branches` (steps) concurrently (threads; one after another on a
        `VirtualClock`); ok when at least `min_results` of them end ok. The
        report's `result` lists each branch's result (None where it did not end ok)."""
        return self._sync(*self._fanout_of(id, min_results, branches))

    async def fanout_async(self, id: str, min_results: int, branches: Sequence[Any]) -> StepReport:
        """`fanout` for asyncio (branches run with `asyncio.gather`)."""
        return await self._async(*self._fanout_of(id, min_results, branches))

    def cancel(self) -> Optional[StepReport]:
        """Cancel the run. Between steps: runs the compensations of the
        completed steps now (reverse order) and returns the `cancelled` report.
        While a step runs (another thread or task): sets the signal and returns
        None; that step ends `cancelled`."""
        now, report = self._cancelling()
        return self._sync(self._cancel_input(), None) if now else report

    async def cancel_async(self) -> Optional[StepReport]:
        """`cancel` for asyncio (async compensations are awaited)."""
        now, report = self._cancelling()
        return await self._async(self._cancel_input(), None) if now else report

    def _cancelling(self) -> Tuple[bool, Optional[StepReport]]:
        """Set the signal; (True, None) when the loop must cancel the run now,
        else (False, the report to return: None while a step runs)."""
        self.cancelled.set()
        self._wake()
        if self._busy:
            return False, None
        if self._finished is not None:
            return False, _after_the_end(self._finished)
        return True, None

    def end(self) -> None:
        """Say the run is complete (between steps): the loop deletes its journal
        entry, so `recover` will not roll it back. Ending a finished run does
        nothing. `with runtime.run(id) as run:` ends it on a normal exit and
        leaves it to `recover` on an exception."""
        if self._finished is None:
            self._sync(self._end_input(), None)

    async def end_async(self) -> None:
        """`end` for asyncio; `async with runtime.run(id) as run:` calls it."""
        if self._finished is None:
            await self._async(self._end_input(), None)

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.end()

    async def __aenter__(self) -> "Run":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            await self.end_async()

    def _step_of(self, step: Any, options: Dict[str, Any], end: bool = False) -> Tuple[str, Step]:
        """The loop input of a step (a `Step` or its options) and the step, its id claimed;
        with `end`, the input ends the run when the step finishes (a door's run of one step)."""
        s = Step.of(step, options)
        self._claim_ids([s.id])
        return self._step_text_input(s, end), s

    def _fanout_of(self, id: str, min_results: int, branches: Sequence[Any]) -> Tuple[str, _Fanout]:
        f = _Fanout(id, min_results, branches)
        self._claim_ids([f.id] + [b.id for b in f.branches])
        return self._fanout_input(f), f

    async def _step_spec(self, io: "_IO", spec: Dict[str, Any], step: Step) -> StepReport:
        """A step whose loop input is `spec` as given (a replay's carries `replay_of`)."""
        self._claim_ids([step.id])
        return await self._carry_step(io, self._step_input(spec), step)

    def _dead_letter_depth(self, seq: int, record: str, t_ms: int, threshold: Any = None) -> Optional[str]:
        """Store work after the loop appended dead-letter record `seq`: record the
        depth gauge, and return the `dead_letter_depth` event text when the depth
        crossed the threshold (the only event a runtime makes: only the store
        knows the sequence number), else None. `t_ms` is the `dead_letter`
        event's, emitted just before the append; `threshold` the append
        effect's `depth_threshold`."""
        from .deadletters import depth_event

        rt = self._rt
        rt._telemetry.dead_letter_depth(rt.dead_letters.depth)
        return depth_event(rt, seq, record, t_ms, threshold)

    def _depth_event(self, holder: _Holder, text: str) -> None:
        """Report a `dead_letter_depth` event (on the caller's thread)."""
        rt = self._rt
        holder.events.append(text)
        holder.tel.event(text, rt._clock)
        rt._store_event(text)

    def _claim_ids(self, ids: List[str]) -> None:
        """Step ids are unique in a run (docs/runtime.md, "Inputs"); the loop
        does not refuse a repeated one, so the runtime does, before anything runs."""
        if self._finished is not None:
            return
        seen = set(self._ids)
        for sid in ids:
            if sid in seen:
                raise _bad(
                    f"step id {sid!r} is used twice in run; step ids are unique in a run "
                    "(an awaiting_input step is resumed in a new run with the same run id)"
                )
            seen.add(sid)
        self._ids.update(ids)

    # -- inputs -----------------------------------------------------------------

    def _now(self) -> int:
        return self._rt._clock.now_ms()

    def _started(self) -> None:
        """Send the `run` input alone when it is still to be sent."""
        if self._unstarted is not None:
            run_id, self._unstarted = self._unstarted, None
            self._holder.state, _ = self._rt._looper.advance("", self._rt._run_input(run_id, self._started_ms))

    def _step_head(self) -> str:
        """A step input's text up to its `step` member: the `run` input
        carrying it while the run is still to be started."""
        if self._unstarted is not None:
            run_id, self._unstarted = self._unstarted, None
            return f'{self._rt._run_input(run_id, self._started_ms)[:-1]},{_READ_STOPS}'
        return f'{{"input":"step","now_ms":{self._now()},{_READ_STOPS}'

    def _step_input(self, spec: Dict[str, Any]) -> str:
        try:
            return f'{self._step_head()}{_dumps(spec, "step")}}}'
        except (TypeError, ValueError) as e:
            raise _bad(f"step {spec.get('id')!r} cannot be sent to the loop: {e}") from None

    def _step_text_input(self, step: Step, end: bool = False) -> str:
        try:
            tail = ',"end":true}' if end else "}"
            return f'{self._step_head()}{step.spec_text()}{tail}'
        except (TypeError, ValueError) as e:
            raise _bad(f"step {step.id!r} cannot be sent to the loop: {e}") from None

    def _fanout_input(self, f: _Fanout) -> str:
        self._started()
        try:
            return f'{{"input":"fanout","now_ms":{self._now()},"fanout":{_dumps(f.spec(), "fanout")}}}'
        except (TypeError, ValueError) as e:
            raise _bad(f"fan-out {f.id!r} cannot be sent to the loop: {e}") from None

    def _cancel_input(self) -> str:
        self._started()
        return f'{{"input":"cancel","now_ms":{self._now()}}}'

    def _end_input(self) -> str:
        self._started()
        return f'{{"input":"end","now_ms":{self._now()}}}'

    def _is_cancelled(self) -> bool:
        return self.cancelled.is_set() or (
            self._cancel_at is not None and self._now() >= self._cancel_at
        )

    def _wake(self) -> None:
        wake = self._async_wake
        if wake is not None:
            loop, event = wake
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop is closed
                pass

    # -- the driver (shared by the sync and the async executors) -----------------

    def _drive(
        self, holder: _Holder, input: str, step: Any
    ) -> Generator[_Need, Any, StepReport]:
        """Feed `input`, carry out the effects, answer the last one, until `finish`.
        Yields what needs the caller's I/O style (call, sleep, restore, fork) and
        receives the next input text."""
        rt = self._rt
        store = rt._store
        ops = rt._ops
        inline = ops.inline
        clock = rt._clock
        looper = rt._looper
        # A step sent with `end`: its report, once it finished; the run's end
        # (its journal delete, its `finish`) follows in the same batch.
        first: Optional[StepReport] = None
        while True:
            holder.state, effects_text = looper.advance(holder.state, input)
            nxt: Optional[str] = None
            effects = _effects(effects_text, holder.state)
            for fx, raw in effects:
                kind = fx.get("effect")
                if kind == "emit":
                    text = raw.get("event")
                    if text is None:
                        raise _malformed("emit without event")
                    holder.events.append(text)
                    if rt._on_event is not None:
                        rt._store_event(text, fx["event"])
                    holder.tel.event(text, clock)
                elif kind == "read":
                    now = clock.now_ms()
                    keys = list(fx.get("keys") or ())
                    # A store that never blocks is called in place (no `_store` generator).
                    got = ops.read(keys, now) if inline else (yield ("store", ops.read, keys, now))
                    if type(got) is list and len(got) == len(keys) and got.count(None) == len(got):
                        if fx.get("go_on_if_absent") is True:  # nothing found: the batch goes on
                            continue
                        # Every key absent (a first step): the same text, without the pairs.
                        values = ":null,".join(map(_jstr, keys)) + ":null" if keys else ""
                        nxt = f'{{"input":"read","now_ms":{now},"values":{{{values}}},"versions":{{}},{_STOPS}}}'
                    else:
                        parts = [_jstr(key) + ":" + (v.value if v is not None else "null") for key, v in zip(keys, got, strict=True)]
                        vers = [_jstr(key) + ":" + str(v.version) for key, v in zip(keys, got, strict=True) if v is not None]
                        nxt = (
                            f'{{"input":"read","now_ms":{now},"values":{{{",".join(parts)}}},'
                            f'"versions":{{{",".join(vers)}}},{_STOPS}}}'
                        )
                        if fx.get("go_on_if_absent") is True:  # a value found ends the batch
                            break
                elif kind == "write":
                    key, value = fx.get("key"), raw.get("value")
                    if not isinstance(key, str) or value is None:
                        raise _malformed("write without key or value")
                    if inline:
                        ops.put(key, value, fx.get("ttl_ms"), clock.now_ms())
                    else:
                        yield ("store", ops.put, key, value, fx.get("ttl_ms"), clock.now_ms())
                elif kind == "claim" or kind == "swap":
                    # A swap: a compare-and-set the loop re-applies itself on a conflict (a breaker update).
                    key, value = fx.get("key"), raw.get("value")
                    expected = fx.get("expected") if kind == "swap" else None
                    if not isinstance(key, str) or value is None:
                        raise _malformed(f"{kind} without key or value")
                    now = clock.now_ms()
                    ttl_ms = fx.get("ttl_ms")
                    if inline:
                        cas = ops.cas(key, expected, value, ttl_ms, now)
                    else:
                        cas = yield ("store", ops.cas, key, expected, value, ttl_ms, now)
                    done = isinstance(cas, Written)
                    cur = None if done else cas.current
                    current = "" if done else f',"current":{cur.value if cur is not None else "null"}'
                    if kind == "claim":
                        nxt = f'{{"input":"claimed","now_ms":{now},"ok":{_jbool(done)}{current}}}'
                        if not done:  # a failed claim ends its batch (`_STOPS`)
                            break
                    else:
                        version = cas.version if done else cur.version if cur is not None else "null"
                        nxt = f'{{"input":"swapped","now_ms":{now},"ok":{_jbool(done)}{current},"version":{version}}}'
                elif kind == "delete":
                    key = fx.get("key")
                    if not isinstance(key, str):
                        raise _malformed("delete without key")
                    yield from _store(inline, store.delete, key)
                elif kind == "append":
                    stream, record = fx.get("stream"), raw.get("record")
                    if not isinstance(stream, str) or record is None:
                        raise _malformed("append without stream or record")
                    seq = yield ("store", store.append, stream, record, clock.now_ms())
                    holder.tel.appended(stream, record, clock)
                    if stream == _DEAD_LETTER_STREAM:
                        self._dead_letter_ids.append(seq)
                        t_ms = _last_t_ms(holder)
                        text = yield ("store", self._dead_letter_depth, seq, record, t_ms, fx.get("depth_threshold"))
                        if text is not None:
                            self._depth_event(holder, text)
                elif kind == "decide":
                    obs, ctx = fx.get("observation"), fx.get("context")
                    if not isinstance(obs, str) or not isinstance(ctx, str):
                        raise _malformed("decide without observation or context")
                    decision = rt._decider.decide_json(obs, ctx)
                    holder.tel.decided(decision)
                    # The decision log's `policy`: who decided, when the runtime knows.
                    who = rt._decision_log.policy() if rt._decision_log is not None else ""
                    nxt = f'{{"input":"decision","now_ms":{clock.now_ms()},"decision":{decision}{who}}}'
                elif kind == "log":
                    line = fx.get("line")
                    if not isinstance(line, str):
                        raise _malformed("log without line")
                    if rt._decision_log is not None:
                        yield ("log", rt._decision_log.write, line)
                elif kind == "sleep":
                    nxt = yield ("sleep", int(fx.get("ms") or 0), fx.get("cancellable", True) is not False)
                elif kind == "restore":
                    hook = step.checkpoint if isinstance(step, Step) else None
                    if hook is None and self._ops is not None:
                        hook = self._ops.checkpoint(self._tools.get(str(fx.get("step")), ""))
                    nxt = yield ("restore", hook)
                elif kind == "call":
                    call = Call(
                        kind=str(fx.get("call") or ""),
                        step=str(fx.get("step") or ""),
                        target=str(fx.get("target") or ""),
                        key=str(fx.get("key") or ""),
                        attempt=int(fx.get("attempt") or 1),
                        timeout_ms=fx.get("timeout_ms"),
                        cancelled=self.cancelled,
                    )
                    self._tools[call.step] = str(fx.get("tool") or "")
                    if call.kind == "compensation":
                        fn = self._undo.get(call.step)
                        if fn is None and self._ops is not None:
                            fn = self._ops.compensation(str(fx.get("tool") or ""))
                    else:
                        if self._is_cancelled():
                            nxt = self._cancel_input()
                            continue
                        fn = step.operation if isinstance(step, Step) else None
                        if fn is None and self._ops is not None:
                            fn = self._ops.operation(str(fx.get("tool") or ""))
                    holder.value = _UNSET
                    holder.tel.call_start(call, clock)
                    if fn is None or fn is _unknown_tool:  # nothing to call: the loop makes the failure
                        missing = "no_compensation" if fn is None else "unknown_tool"
                        nxt = f'{{"input":"attempt","now_ms":{clock.now_ms()},"result":"{missing}"}}'
                    else:
                        nxt = yield ("call", call, fn, holder)
                    holder.tel.call_end(clock)
                    if self._kill_after is not None:
                        self._calls += 1
                        if self._calls == self._kill_after:
                            raise _Killed()
                elif kind == "fork":
                    if not isinstance(step, _Fanout):
                        raise _malformed("fork outside a fan-out")
                    nxt = yield ("fork", fx, step, holder)
                elif kind == "finish":
                    self._last_finish = fx
                    if first is not None:  # the run's end after the step's
                        self._finished = str(fx.get("outcome") or "")
                        return first
                    holder.tel.finish(fx, clock)
                    value = fx.get("result")
                    if fx.get("outcome") == "ok" and holder.value is not _UNSET:
                        value = holder.value
                    report = StepReport(
                        outcome=str(fx.get("outcome") or ""),
                        run_finished=fx.get("run_finished", True) is not False,
                        result=value,
                        envelope=fx.get("envelope"),
                        rendered=fx.get("rendered"),
                        token=fx.get("token"),
                    )
                    if fx is not effects[-1][0]:
                        first = report
                        continue
                    return report
                else:
                    raise _malformed(str(kind))
            if nxt is None:
                raise _malformed("a batch without an effect to answer")
            input = nxt

    def _begin(self) -> Optional[StepReport]:
        if self._finished is not None:
            return _after_the_end(self._finished)
        if self._busy:
            raise _bad("a step of this run is already running; runs take one step at a time (use fanout for concurrency)")
        self._busy = True
        return None

    def _end(self, report: StepReport, step: Any) -> StepReport:
        self._busy = False
        if report.run_finished:
            self._finished = report.outcome
        if report.outcome == "ok" and isinstance(step, Step) and step.compensate is not None:
            self._undo[step.id] = step.compensate
        return report

    def _joined(self, lane: _Holder, now: int, branches: List[_Holder]) -> str:
        """The `joined` input; the branches' events join the lane's, in branch order."""
        for b in branches:
            lane.events.extend(b.events)
        return _joined_input(now, [b.state for b in branches])

    def _branch_done(self, branch: Step, report: StepReport) -> None:
        if report.outcome == "ok" and branch.compensate is not None:
            self._undo[branch.id] = branch.compensate

    # -- the executor (one for both paths) ------------------------------------------
    #
    # `_carry` answers the driver's needs. What differs between the blocking and
    # the asyncio path (how to sleep, wait, await an operation, run branches,
    # reach the store) is an `_IO` below; the blocking path runs the same
    # coroutines without an event loop (`_no_wait`): its `_IO` never suspends.

    def _sync(self, input: str, step: Any) -> StepReport:
        return _no_wait(self._carry_step(BLOCKING, input, step))

    async def _async(self, input: str, step: Any) -> StepReport:
        return await self._carry_step(ASYNCIO, input, step)

    async def _carry_step(self, io: "_IO", input: str, step: Any) -> StepReport:
        done = self._begin()
        if done is not None:
            return done
        try:
            self._holder.tel = self._tel.lane(step, self._rt._clock)
            report = await self._carry(io, self._drive(self._holder, input, step))
        except BaseException:
            self._busy = False
            self._holder.tel.abandon(self._rt._clock)
            raise
        return self._end(report, step)

    async def _carry(self, io: "_IO", gen: Generator[_Need, Any, StepReport]) -> StepReport:
        try:
            need = next(gen)
            while True:
                if need[0] == "store" or need[0] == "log":
                    need = gen.send(await io.store_work(self, need))
                    continue
                try:
                    answer = await self._do(io, need)
                except asyncio.CancelledError:
                    if io is BLOCKING:
                        raise
                    # The task was cancelled: that cancels the run (no new
                    # attempts; the compensations still run; outcome cancelled).
                    _uncancel()
                    self.cancelled.set()
                    answer = self._interrupted(need)
                need = gen.send(answer)
        except StopIteration as stop:
            report: StepReport = stop.value
            return report

    def _interrupted(self, need: _Need) -> str:
        """The answer to `need` when the task was cancelled while carrying it out."""
        now = self._now()
        if need[0] == "call" and need[1].kind == "compensation":
            failed = _failed_exception(asyncio.CancelledError("the compensation was cancelled"))
            return f'{{"input":"attempt","now_ms":{now},"result":{failed}}}'
        if need[0] == "restore":
            return f'{{"input":"restored","now_ms":{now},"ok":false}}'
        if need[0] == "sleep" and not need[2]:
            return f'{{"input":"slept","now_ms":{now}}}'
        return self._cancel_input()

    def _wake_event(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        wake = self._async_wake
        if wake is None or wake[0] is not loop:
            self._async_wake = (loop, asyncio.Event())
            wake = self._async_wake
        if self.cancelled.is_set():
            wake[1].set()
        return wake[1]

    async def _do(self, io: "_IO", need: _Need) -> str:
        clock = self._rt._clock
        what = need[0]
        if what == "sleep":
            _, ms, cancellable = need
            if cancellable and self._is_cancelled():
                return self._cancel_input()
            at = self._cancel_at
            if cancellable and at is not None and clock.now_ms() + ms > at:
                await io.sleep(clock, max(0, at - clock.now_ms()))
                return self._cancel_input()
            if cancellable and isinstance(clock, SystemClock):
                if await io.wait_cancelled(self, ms):
                    return self._cancel_input()
            else:
                await io.sleep(clock, ms)
            return f'{{"input":"slept","now_ms":{clock.now_ms()}}}'
        if what == "restore":
            hook = need[1]
            ok = False
            if hook is not None:
                out = hook()
                if _isawaitable(out):
                    out, _ = await io.awaited(io.awaitable(out, "the checkpoint hook is async; use step_async"), None, clock)
                ok = bool(out)
            return f'{{"input":"restored","now_ms":{clock.now_ms()},"ok":{"true" if ok else "false"}}}'
        if what == "call":
            _, call, fn, holder = need
            started = clock.now_ms()
            timed_out = False
            result = ""
            try:
                value = fn(call)
            except Exception as exc:  # noqa: BLE001 - every failure is observed
                value, result = _UNSET, _failed_exception(exc)
            if value is not _UNSET and _isawaitable(value):
                value = io.awaitable(value, f"the operation of step {call.step!r} is async; use step_async")
                try:
                    value, timed_out = await io.awaited(value, call.timeout_ms, clock)
                except Exception as exc:  # noqa: BLE001 - every failure is observed
                    value, result = _UNSET, _failed_exception(exc)
            if value is not _UNSET and not timed_out:
                result, holder.value = _result_of(value)
            # How long it took: the loop judges it against the call's timeout.
            took = max(0, clock.now_ms() - started)
            if timed_out:
                holder.value = _UNSET
                result = '"timed_out"'
            return f'{{"input":"attempt","now_ms":{clock.now_ms()},"took_ms":{took},"result":{result}}}'
        if what == "fork":
            _, fx, fanout, lane = need
            return await self._fork(io, fx, fanout, lane)
        raise _malformed(str(what))

    async def _fork(self, io: "_IO", fx: Dict[str, Any], fanout: _Fanout, lane: _Holder) -> str:
        clock = self._rt._clock
        branches = _fork_branches(fx, fanout)
        start = clock.now_ms()
        holders: List[_Holder] = []
        lane.tel.fork()

        async def one(item: Tuple[str, Dict[str, Any], Step]) -> _Holder:
            state, spec, branch = item
            holder = _Holder(state)
            holder.tel = lane.tel.branch(spec, clock)
            holders.append(holder)
            input = f'{{"input":"step","now_ms":{clock.now_ms()},{_READ_STOPS}{_dumps(spec)}}}'
            report = await self._carry(io, self._drive(holder, input, branch))
            self._branch_done(branch, report)
            return holder

        if _is_virtual(clock):
            states, latest = [], start
            try:
                for item in branches:
                    clock.set_ms(start)
                    states.append(await one(item))
                    latest = max(latest, clock.now_ms())
            except _Killed:  # a scenario's kill: the branches' events so far stay
                for h in holders:
                    lane.events.extend(h.events)
                raise
            clock.set_ms(latest)
        else:
            states = await io.together(self, one, branches)
        return self._joined(lane, clock.now_ms(), states)


class _IO:
    """How the executor waits: the blocking path (`BLOCKING`) or asyncio
    (`ASYNCIO`). The blocking one's coroutines never suspend."""

    async def store_work(self, run: Run, need: _Need) -> Any:
        """A `store` or `log` need carried out: `need[1](*need[2:])`."""
        return need[1](*need[2:])

    async def store(self, store: Any, fn: Callable[..., T], *args: Any) -> T:
        """Store work outside a step (recover, replay): `fn(*args)`."""
        return fn(*args)

    async def sleep(self, clock: Clock, ms: int) -> None:
        clock.sleep_ms(ms)

    async def wait_cancelled(self, run: Run, ms: int) -> bool:
        """Wait `ms` on the real clock or until the run is cancelled; True when it was."""
        return run.cancelled.wait(ms / 1000)

    def awaitable(self, value: Any, refusal: str) -> Any:
        """What an operation or a hook returned that is awaitable, when the path
        can await it (else `refusal`)."""
        _close(value)
        raise _bad(refusal)

    async def awaited(self, value: Any, timeout_ms: Optional[int], clock: Clock) -> Tuple[Any, bool]:
        """(the operation's awaited value, whether it timed out)."""
        raise AssertionError("the blocking path awaits nothing")

    async def together(self, run: Run, one: Callable[[Any], Any], items: List[Any]) -> List[_Holder]:
        """The branches of a fan-out on a real clock, concurrently: threads."""
        if len(items) <= 1:
            return [_no_wait(one(item)) for item in items]
        with ThreadPoolExecutor(max_workers=len(items)) as pool:
            return list(pool.map(lambda item: _no_wait(one(item)), items))


class _Asyncio(_IO):
    async def store_work(self, run: Run, need: _Need) -> Any:
        """Blocking work (store calls, decision log files) off the loop
        (`_offloop`), or on it when it never blocks (a `MemoryStore`; the
        caller's own callable or Logger, as any of its hooks). Cancelling the
        task while it runs cancels the run once the call has answered (it is
        bounded by the store's own timeout): the loop gets the real answer."""
        store = run._rt._store
        if _offloop.on_loop(store) if need[0] == "store" else not isinstance(need[1], _decision_log.FileSink):
            return need[1](*need[2:])
        fut = _offloop.start(store, need[1], *need[2:])
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            _uncancel()
            run.cancelled.set()
            return await fut

    async def store(self, store: Any, fn: Callable[..., T], *args: Any) -> T:
        return await _offloop.call(store, fn, *args)

    async def sleep(self, clock: Clock, ms: int) -> None:
        sleeper = getattr(clock, "sleep_ms_async", None)
        if sleeper is not None:
            await sleeper(ms)
        else:
            clock.sleep_ms(ms)

    async def wait_cancelled(self, run: Run, ms: int) -> bool:
        # Woken at once by run.cancel(); a signal set directly (from any
        # thread) is seen within _SIGNAL_POLL_S.
        wake = run._wake_event()
        end = time.monotonic() + ms / 1000
        while (left := end - time.monotonic()) > 0:
            try:
                await asyncio.wait_for(wake.wait(), min(left, _SIGNAL_POLL_S))
            except asyncio.TimeoutError:
                pass
            if run.cancelled.is_set():
                return True
        return False

    def awaitable(self, value: Any, refusal: str) -> Any:
        return value

    async def awaited(self, value: Any, timeout_ms: Optional[int], clock: Clock) -> Tuple[Any, bool]:
        if timeout_ms is not None and not _is_virtual(clock):
            try:
                return await asyncio.wait_for(_awaited(value), timeout_ms / 1000), False
            except asyncio.TimeoutError:
                return None, True
        return await value, False

    async def together(self, run: Run, one: Callable[[Any], Any], items: List[Any]) -> List[_Holder]:
        tasks = [asyncio.ensure_future(one(item)) for item in items]
        try:
            return list(await asyncio.shield(asyncio.gather(*tasks)))
        except asyncio.CancelledError:
            # Cancelling the caller cancels the run: the branches see the
            # signal (no new attempts, sleeps cut short) and end cancelled.
            _uncancel()
            run.cancelled.set()
            run._wake()
            return list(await asyncio.gather(*tasks))


BLOCKING = _IO()
ASYNCIO = _Asyncio()


def _no_wait(coro: Coroutine[Any, Any, T]) -> T:
    """The value of a coroutine of the blocking path (which never suspends)."""
    try:
        coro.send(None)
    except StopIteration as done:
        value: T = done.value
        return value
    coro.close()
    raise AssertionError("the blocking path waited on an event loop")


def _uncancel() -> None:
    """Take back the cancellation of the current task (it cancels the run instead)."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


#: How often an async sleep on a real clock looks at a cancellation signal set
#: directly on the event (run.cancel() wakes it at once).
_SIGNAL_POLL_S = 0.05


def _is_virtual(clock: Any) -> bool:
    is_virtual = getattr(clock, "is_virtual", None)
    return bool(is_virtual()) if callable(is_virtual) else False


async def _awaited(value: Any) -> Any:
    return await value


def _close(value: Any) -> None:
    close = getattr(value, "close", None)
    if callable(close):
        close()


def _fork_branches(fx: Dict[str, Any], fanout: _Fanout) -> List[Tuple[str, Dict[str, Any], Step]]:
    out = []
    for b in fx.get("branches") or ():
        if not isinstance(b, dict) or not isinstance(b.get("state"), str) or not isinstance(b.get("step"), dict):
            raise _malformed("fork branch without state or step")
        spec = b["step"]
        branch = fanout.by_id.get(str(spec.get("id")))
        if branch is None:
            raise _malformed(f"fork branch {spec.get('id')!r} is not a branch of fan-out {fanout.id!r}")
        out.append((b["state"], spec, branch))
    return out


def _joined_input(now: int, states: List[str]) -> str:
    return f'{{"input":"joined","now_ms":{now},"states":{json.dumps(states, ensure_ascii=False)}}}'




class _Killed(BaseException):
    """A scenario's `kill_after_calls` was reached: the run stops as if its
    process died (nothing fed back, never ended). A BaseException, so no
    operation wrapper observes it as a failure."""


def _after_the_end(outcome: str) -> StepReport:
    return StepReport(outcome=outcome, run_finished=True)


#: Types whose values are never awaitable (what most operations return).
_PLAIN_TYPES = frozenset((dict, list, str, int, float, bool, type(None), tuple, bytes))


def _isawaitable(value: Any) -> bool:
    """`inspect.isawaitable`, without its ABC check for a plain value."""
    return type(value) not in _PLAIN_TYPES and inspect.isawaitable(value)


def _is_count(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _store(inline: bool, fn: Callable[..., Any], *args: Any) -> Generator[_Need, Any, Any]:
    """`fn(*args)` (store work), in place when the store never blocks, else
    yielded to the executor."""
    if inline:
        return fn(*args)
    return (yield ("store", fn, *args))


class _StoreOps:
    """The store calls of the driver. A `MemoryStore` never blocks, so the
    driver calls it in place (`inline`) on both paths, through its own calls
    for the loop's values; any other store is called through the executor
    (off the event loop on the async path)."""

    __slots__ = ("inline", "read", "put", "cas")

    def __init__(self, store: Any) -> None:
        self.inline = _offloop.on_loop(store)
        if type(store) is MemoryStore:
            self.read: Callable[[List[str], int], List[Any]] = store._get_many_loop
            self.put: Callable[[str, str, Optional[int], int], None] = store._put_loop
            self.cas: Callable[..., Any] = store._cas_loop
        else:
            self.read = functools.partial(_read_values, store)
            self.put = functools.partial(_put, store)
            self.cas = store.compare_and_set


def _read_values(store: Any, keys: List[str], now: int) -> List[Any]:
    """The live entries of `keys` (None for an absent one), for a `read` effect."""
    return [store.get(key, now) for key in keys]


def _last_t_ms(holder: _Holder) -> int:
    """The `t_ms` of the lane's last event (0 when none)."""
    if holder.events:
        last = json.loads(holder.events[-1])
        if isinstance(last, dict) and isinstance(last.get("t_ms"), int):
            return int(last["t_ms"])
    return 0


def _put(store: Any, key: str, value: str, ttl_ms: Optional[int], now: int) -> None:
    """Last-writer-wins put on top of compare-and-set (as in Rust)."""
    for _ in range(16):
        current = store.get(key, now)
        version = current.version if current is not None else None
        if isinstance(store.compare_and_set(key, version, value, ttl_ms, now), Written):
            return
    raise StoreError(
        "unavailable",
        f"could not write {key}: 16 compare-and-set conflicts in a row; the store is contended, retry the run",
    )

