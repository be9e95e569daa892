"""OpenTelemetry spans and metrics of the recovery runtime.

Telemetry observes; it never decides. It sees what the driver does (each
`call` effect's start and end on the runtime's clock, each `decide` answer,
each `append`) and the component's events, and turns them into the spans,
attributes, span events and metrics of `docs/telemetry.md` (the schema every
runtime follows; the Rust host's `runtime/telemetry.rs` is the twin of this
module and of `_lanes.py`, which holds the mapping itself). Only the OpenTelemetry **API** (`opentelemetry-api`) is used: until
your program installs an SDK, the global providers are no-ops.

| `Runtime(telemetry=...)` | what |
| --- | --- |
| `Telemetry.global_()` (or `Telemetry()`) | **the default**: the global tracer and meter providers (`opentelemetry.trace.set_tracer_provider`, `opentelemetry.metrics.set_meter_provider`) |
| `Telemetry(tracer_provider=tp, meter_provider=mp)` | these providers (e.g. the SDK's `TracerProvider` and `MeterProvider`); one left out is the global one |
| `Telemetry.off()` | no spans, no metrics, no call into OpenTelemetry at all |

The API's global providers are proxies, so a provider installed after the
runtime was built is used too, from the next run on (Rust reads them when the
runtime is built). While nothing is installed behind them, a run makes no
OpenTelemetry call at all (every one would be a no-op). `opentelemetry` is
imported when a runtime with telemetry on is built, not with this package.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Dict, Optional

from ._lanes import _ns, _RunTel
from .handle import PolicyHandle
from .policy import Policy

__all__ = ["SCOPE_NAME", "Telemetry"]

#: The instrumentation scope (tracer and meter name) of every span and instrument.
SCOPE_NAME = "agent-recovery"


class Telemetry:
    """Where a `Runtime` sends its spans and metrics (see the module docs).

    `Telemetry(tracer_provider=None, meter_provider=None, logger_provider=None)`:
    these providers; None is the global one, so `Telemetry()` is
    `Telemetry.global_()`. `logger_provider` (e.g. the SDK's
    `opentelemetry.sdk._logs.LoggerProvider`) adds a log record per dead-letter
    write; there is no global default for it (as in Rust and Node), and it
    needs opentelemetry-api >= 1.35 (log records with an event name).
    """

    __slots__ = ("_tracer_provider", "_meter_provider", "_logger_provider", "_on")

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None, logger_provider: Any = None) -> None:
        """These providers (None: the global one; for logs: none)."""
        if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
            raise _bad("tracer_provider must be an OpenTelemetry TracerProvider (with get_tracer)")
        if meter_provider is not None and not callable(getattr(meter_provider, "get_meter", None)):
            raise _bad("meter_provider must be an OpenTelemetry MeterProvider (with get_meter)")
        if logger_provider is not None:
            if not callable(getattr(logger_provider, "get_logger", None)):
                raise _bad("logger_provider must be an OpenTelemetry LoggerProvider (with get_logger)")
            if not _logs_with_event_names():
                raise _bad(
                    "logger_provider needs opentelemetry-api >= 1.35 (log records with event_name); "
                    "upgrade opentelemetry-api or leave logger_provider out"
                )
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._logger_provider = logger_provider
        self._on = True

    @classmethod
    def global_(cls) -> "Telemetry":
        """The global tracer and meter providers (no-ops unless your program installs an SDK).
        The default; named with a trailing underscore because `global` is a keyword."""
        return cls()

    @classmethod
    def off(cls) -> "Telemetry":
        """No spans, no metrics, no call into OpenTelemetry at all."""
        t = cls()
        t._on = False
        return t

    @property
    def is_on(self) -> bool:
        """False for `Telemetry.off()`."""
        return self._on

    def __repr__(self) -> str:
        if not self._on:
            return "Telemetry.off()"
        if self._tracer_provider is None and self._meter_provider is None and self._logger_provider is None:
            return "Telemetry.global_()"
        logs = "" if self._logger_provider is None else f", logger_provider={self._logger_provider!r}"
        return f"Telemetry(tracer_provider={self._tracer_provider!r}, meter_provider={self._meter_provider!r}{logs})"


def _logs_with_event_names() -> bool:
    """Does the installed API's `LogRecord` take `event_name` and `context`?"""
    import inspect

    try:
        from opentelemetry._logs import LogRecord
    except ImportError:
        return False
    params = inspect.signature(LogRecord.__init__).parameters
    return "event_name" in params and "context" in params


def _bad(message: str) -> Exception:
    from .errors import PolicyError

    return PolicyError("invalid_argument", message)


@functools.lru_cache(maxsize=None)
def _version() -> str:
    """The package's version (read once: parsing its metadata takes milliseconds)."""
    try:
        from importlib.metadata import version

        return version("agent-recovery")
    except Exception:  # not installed (a checkout on sys.path)
        return "0.1.0"


class _Instruments:
    """The tracer, the instruments and the OpenTelemetry names a lane needs."""

    def __init__(self, t: Telemetry) -> None:
        from opentelemetry import context, metrics, trace

        tp = t._tracer_provider if t._tracer_provider is not None else trace.get_tracer_provider()
        mp = t._meter_provider if t._meter_provider is not None else metrics.get_meter_provider()
        # Before a provider is installed, the global ones are the API's proxies,
        # whose every call is a no-op (unconfigured() below). The API keeps the
        # installed providers in these module globals (get_tracer_provider() and
        # get_meter_provider() above have loaded any named by OTEL_PYTHON_*).
        self.globals: Any = None
        if t._tracer_provider is None and t._meter_provider is None:
            from opentelemetry.metrics import _internal as metrics_internal

            if "_TRACER_PROVIDER" in vars(trace) and "_METER_PROVIDER" in vars(metrics_internal):
                self.globals = (trace, metrics_internal)
            # else another API version: no shortcut, the no-op calls are made
        version = _version()
        self.tracer = tp.get_tracer(SCOPE_NAME, version)
        meter = mp.get_meter(SCOPE_NAME, version)
        self.trace = trace
        self.get_current = context.get_current
        self.internal = trace.SpanKind.INTERNAL
        self.error = trace.StatusCode.ERROR
        self.status = trace.Status
        c = meter.create_counter
        self.attempts = c(
            "agent_recovery.attempts",
            unit="{attempt}",
            description="Calls made: operation, fallback and compensation attempts",
        )
        self.decisions = c(
            "agent_recovery.decisions", unit="{decision}", description="Decisions on failures, by code and action"
        )
        self.retry_delay = meter.create_histogram(
            "agent_recovery.retry.delay", unit="ms", description="Waits before the next call"
        )
        self.breaker = c(
            "agent_recovery.breaker.transitions",
            unit="{transition}",
            description="Circuit breaker state changes, by target and new state",
        )
        self.short_circuits = c(
            "agent_recovery.short_circuits",
            unit="{call}",
            description="Calls not made because the target's breaker was open",
        )
        self.dead_letters = c(
            "agent_recovery.dead_letters", unit="{record}", description="Dead-letter records written, by code"
        )
        self.compensations = c(
            "agent_recovery.compensations",
            unit="{compensation}",
            description="Compensations started, and those that still failed",
        )
        self.dead_letter_depth = meter.create_gauge(
            "agent_recovery.dead_letter.depth",
            unit="{record}",
            description="Dead-letter records not yet closed (replayed successfully or purged)",
        )
        self.steps = c("agent_recovery.steps", unit="{step}", description="Steps and fan-outs ended, by outcome")
        #: A log record per dead-letter write: only with an explicit logger provider.
        self.logger: Any = None
        if t._logger_provider is not None:
            from opentelemetry._logs import LogRecord, SeverityNumber

            self.logger = t._logger_provider.get_logger(SCOPE_NAME, version)
            self.log_record = LogRecord
            self.severity = SeverityNumber

    def unconfigured(self) -> bool:
        """Global providers with nothing installed behind them yet (the API's
        proxies): then every span and metric call would be a no-op, so a run
        makes none. Asked when a run starts: a provider installed later is
        used from the next run on."""
        g = self.globals
        return (
            self.logger is None
            and g is not None
            and g[0]._TRACER_PROVIDER is None
            and g[1]._METER_PROVIDER is None
        )

    def span(self, name: str, parent: Any, attrs: Dict[str, Any], now_ms: int) -> Any:
        return self.tracer.start_span(
            name, context=parent, kind=self.internal, attributes=attrs, start_time=_ns(now_ms)
        )


#: Instruments made, by providers: a runtime built per call (`retry`) reuses them.
_MADE: Dict[Any, _Instruments] = {}
_MADE_LOCK = threading.Lock()
_MADE_MAX = 16


def _instruments(t: Telemetry) -> _Instruments:
    """The instruments of `t`'s providers (the global ones as they are now),
    made once per providers: asking a provider again for the same tracer and
    instruments would return equivalent ones."""
    from opentelemetry import metrics, trace

    tp = t._tracer_provider if t._tracer_provider is not None else trace.get_tracer_provider()
    mp = t._meter_provider if t._meter_provider is not None else metrics.get_meter_provider()
    key = (t._tracer_provider is None and t._meter_provider is None, tp, mp, t._logger_provider)
    try:
        with _MADE_LOCK:
            made = _MADE.get(key)
    except TypeError:  # a provider that cannot be a key
        return _Instruments(t)
    if made is None:
        made = _Instruments(t)
        with _MADE_LOCK:
            if len(_MADE) >= _MADE_MAX:
                _MADE.clear()
            _MADE[key] = made
    return made


def _policy_attrs(decider: Any) -> Any:
    """`agent_recovery.policy.*` of the policy deciding now (empty for a
    custom decider): a dict, or for a `PolicyHandle` a function that reads its
    active policy when called (a hot swap shows)."""
    if isinstance(decider, PolicyHandle):
        return lambda: _identity(decider.policy)
    return _identity(decider)


def _identity(policy: Any) -> Dict[str, Any]:
    if not isinstance(policy, Policy):
        return {}
    return {
        "agent_recovery.policy.name": policy.name,
        "agent_recovery.policy.version": policy.version,
        "agent_recovery.policy.sha256": policy.sha256,
    }


# -- the bound telemetry ------------------------------------------------------------


class _OffLane:
    """A lane with telemetry off: every hook does nothing."""

    __slots__ = ()

    def fork(self) -> None:
        pass

    def branch(self, spec: Any, clock: Any) -> "_OffLane":
        return self

    def call_start(self, call: Any, clock: Any) -> None:
        pass

    def call_end(self, clock: Any) -> None:
        pass

    def decided(self, decision: str) -> None:
        pass

    def appended(self, stream: Any, record: str, clock: Any) -> None:
        pass

    def event(self, event: Any, clock: Any) -> None:
        pass

    def finish(self, fx: Dict[str, Any], clock: Any) -> None:
        pass

    def abandon(self, clock: Any) -> None:
        pass


OFF_LANE = _OffLane()


class _OffRun:
    __slots__ = ()

    def lane(self, step: Any, clock: Any) -> _OffLane:
        return OFF_LANE


_OFF_RUN = _OffRun()


class Bound:
    """A runtime's telemetry, bound to its decider (for the policy attributes)."""

    __slots__ = ("_inst", "_policy", "_looper")

    def __init__(self, telemetry: Optional[Telemetry], decider: Any, looper: Any = None) -> None:
        telemetry = _checked(telemetry)
        self._inst = _instruments(telemetry) if telemetry.is_on else None
        self._policy = _policy_attrs(decider)
        #: The loop component, whose `map-lane-json` maps each lane.
        self._looper = looper

    def dead_letter_depth(self, depth: Callable[[], int]) -> None:
        """Record the `agent_recovery.dead_letter.depth` gauge when anything
        can record; `depth()` (a store read) is only called then. Telemetry
        never fails what it observes: a store error records nothing."""
        if self._inst is None or self._inst.unconfigured():
            return
        try:
            value = depth()
        except Exception:  # noqa: BLE001 - the observed operation already succeeded
            return
        self._inst.dead_letter_depth.set(value)

    def run(self, run_id: str) -> Any:
        """The telemetry of one run."""
        if self._inst is None or self._inst.unconfigured():
            return _OFF_RUN
        return _RunTel(self._inst, self._policy, run_id, self._looper)


def bind(telemetry: Optional[Telemetry], decider: Any, looper: Any = None) -> Bound:
    """The runtime option, checked and bound to the runtime's decider and
    loop component (whose `map-lane-json` maps each lane)."""
    return Bound(telemetry, decider, looper)


# -- a PolicyHandle's swaps (docs/telemetry.md, "Policy swaps") -------------------------


class SwapTelemetry:
    """A `PolicyHandle`'s swaps and refusals: a span event on the caller's
    current span (none when there is none or it is not recording) and the
    `agent_recovery.policy.swaps` counter of the option's meter provider (the
    global one, a proxy, by default)."""

    __slots__ = ("_meter_provider", "_counter")

    def __init__(self, telemetry: Telemetry) -> None:
        self._meter_provider = telemetry._meter_provider
        self._counter: Any = None

    def _count(self, attributes: Dict[str, str]) -> None:
        if self._counter is None:
            from opentelemetry import metrics

            mp = self._meter_provider if self._meter_provider is not None else metrics.get_meter_provider()
            self._counter = mp.get_meter(SCOPE_NAME, _version()).create_counter(
                "agent_recovery.policy.swaps",
                unit="{swap}",
                description="Policy candidates a handle activated or refused",
            )
        self._counter.add(1, attributes)

    @staticmethod
    def _event(name: str, attributes: Dict[str, str]) -> None:
        from opentelemetry import trace

        span = trace.get_current_span()
        if span.is_recording():
            span.add_event(name, attributes)

    def swapped(self, previous: Policy, active: Policy) -> None:
        """`active` passed its checks and replaced `previous`."""
        self._count({"agent_recovery.swap.result": "swapped"})
        self._event(
            "agent_recovery.policy.swapped",
            {**_prefixed("agent_recovery.policy", active), **_prefixed("agent_recovery.swap.from", previous)},
        )

    def refused(self, active: Policy, error: Any) -> None:
        """A candidate was refused with `error` (a `SwapError`); `active` stays."""
        code = getattr(error, "code", None)
        code = code if isinstance(code, str) else "load"
        self._count({"agent_recovery.swap.result": "refused", "error.type": code})
        message = getattr(error, "message", None)
        self._event(
            "agent_recovery.policy.refused",
            {
                **_prefixed("agent_recovery.policy", active),
                "error.type": code,
                "agent_recovery.policy.error.message": message if isinstance(message, str) else str(error),
            },
        )


def _prefixed(prefix: str, policy: Policy) -> Dict[str, str]:
    return {f"{prefix}.name": policy.name, f"{prefix}.version": policy.version, f"{prefix}.sha256": policy.sha256}


def swap_telemetry(telemetry: Optional[Telemetry]) -> Optional[SwapTelemetry]:
    """A handle's `telemetry` option, checked (None: the global providers);
    None when off."""
    telemetry = _checked(telemetry)
    return SwapTelemetry(telemetry) if telemetry.is_on else None


def _checked(telemetry: Optional[Telemetry]) -> Telemetry:
    """A `telemetry` option (of a runtime or a handle), checked; None: the global providers."""
    if telemetry is None:
        return Telemetry.global_()
    if not isinstance(telemetry, Telemetry):
        raise _bad(
            f"telemetry must be a Telemetry (Telemetry.global_(), Telemetry(tracer_provider=, "
            f"meter_provider=) or Telemetry.off()), got {type(telemetry).__name__}"
        )
    return telemetry
