"""The recovery loop's component: the reference's `agent:recovery/runtime@0.2.0`.

Whatever policy decides, the loop always comes from the packaged reference
component (a 0.1 policy has no `runtime` export), exactly as in the Rust host
(`host/src/runtime/component.rs`). It runs in the same sandbox as a policy call
(no filesystem, no network, no environment) under the same `Limits`: memory
capped, fuel per call for its input size; a trap drops the instance and the
next call instantiates the component again.

`advance`, `check-outcome` and `render-named` are called through `_abi` (no per-call type walk);
their types are checked once against the contract below. The dead-letter rules
(`agent:recovery/dead-letters@0.3.0`, off the hot path) go through wasmtime-py's
own component API.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from wasmtime import WasmtimeError
from wasmtime.component import Func

from . import _abi
from ._component import PACKAGE, Compiled, compile_component, engine_and_linker, shape
from ._inputs import utf8
from ._sandbox import new_store, runtime_error
from .errors import PolicyError, PolicyRuntimeError
from .limits import Limits
from .policy import read_source

#: Idle instances kept for reuse.
_POOL = 4

#: Accepted run configurations remembered (`LoopComponent.check_config`).
_CONFIGS = 256

#: The runtime interface and its version.
RUNTIME_INTERFACE = f"{PACKAGE}/runtime@0.2.0"
#: Scripted scenarios' parsing and validation (`parse`).
SCENARIO_INTERFACE = f"{PACKAGE}/scenario@0.3.0"

#: The telemetry mapping's interface (`map-lane-json`, docs/telemetry.md).
TELEMETRY_INTERFACE = f"{PACKAGE}/telemetry@0.3.0"

#: The dead-letter lifecycle rules (docs/durability.md §3) and their functions.
DEAD_LETTERS_INTERFACE = f"{PACKAGE}/dead-letters@0.3.0"
_DEAD_LETTER_FUNCS = (
    "cas-rounds", "cas-exhausted", "parse-id", "not-found", "replay-key", "item", "apply",
    "finish", "pending", "close-one", "depth", "depth-event", "replay-step",
)

_POLICY_ERROR = "record{kind:enum,message:string}"
_TYPES = {
    "advance": (("string", "string"), f"result<record{{state:string,effects:string}},{_POLICY_ERROR}>"),
    "check-outcome": (("string",), f"result<option<string>,{_POLICY_ERROR}>"),
    "render-named": (("string", "string", "string"), f"result<string,{_POLICY_ERROR}>"),
    "map-lane-json": (("string", "string"), f"result<record{{state:string,instructions:string}},{_POLICY_ERROR}>"),
}

#: The interface each function is exported in.
_INTERFACES = {name: RUNTIME_INTERFACE for name in _TYPES}
_INTERFACES["map-lane-json"] = TELEMETRY_INTERFACE


class _Instance:
    """One store and one instance of the loop."""

    def __init__(
        self, compiled: Compiled, indices: Dict[str, Any], limits: Limits, dead_letters: Dict[str, Any]
    ) -> None:
        _, linker = engine_and_linker()
        store = new_store(limits)
        try:
            instance = linker.instantiate(store, compiled.component)
        except WasmtimeError as e:
            raise PolicyRuntimeError(
                "instantiate",
                f"the recovery loop (sha256 {compiled.sha256[:12]}…) could not be "
                f"instantiated: {e}; raise Limits.memory_bytes",
            ) from None
        self.funcs = {}
        for name, index in indices.items():
            func = instance.get_func(store, index)
            if func is None:
                raise PolicyRuntimeError(
                    "incompatible", f"`{_INTERFACES[name]}#{name}` is not a function; reinstall"
                )
            fty = func.type(store)
            params = tuple(shape(t) for _, t in fty.params)
            result = shape(fty.result) if fty.result is not None else "_"
            if (params, result) != _TYPES[name]:
                raise PolicyRuntimeError(
                    "incompatible",
                    f"`{_INTERFACES[name]}#{name}` has type ({', '.join(params)}) -> {result}, "
                    f"expected {_TYPES[name]}; reinstall the package (its component is not "
                    "the reference)",
                )
            self.funcs[name] = func
        self.instance = instance
        self.store = store
        self.dead_letters: Dict[str, Func] = {}
        for name, index in dead_letters.items():
            dl_func = instance.get_func(store, index)
            if dl_func is None:
                raise PolicyRuntimeError(
                    "incompatible", f"`{DEAD_LETTERS_INTERFACE}#{name}` is not a function; reinstall"
                )
            self.dead_letters[name] = dl_func
        ctx = store._context()
        self.callers = {
            n: _abi.Caller(ctypes.byref(f._func), ctx, (_abi.KIND_STRING,) * len(_TYPES[n][0]))
            for n, f in self.funcs.items()
        }


class LoopComponent:
    """The compiled loop and a small pool of instances (thread-safe)."""

    def __init__(self, source: Any = None, limits: Optional[Limits] = None) -> None:
        wasm = read_source(source)
        self._compiled = compile_component(wasm)
        self._limits = limits or Limits()
        component = self._compiled.component
        ifaces: Dict[str, Any] = {}

        def export(interface: str, name: str) -> Any:
            if interface not in ifaces:
                ifaces[interface] = component.get_export_index(interface)
            iface = ifaces[interface]
            index = component.get_export_index(name, iface) if iface is not None else None
            if index is None:
                raise PolicyRuntimeError(
                    "incompatible",
                    f"the reference component does not export `{interface}#{name}`; "
                    "reinstall the package (`pip install ./python`) so that it bundles a "
                    "current build of the reference",
                )
            return index

        indices = {name: export(_INTERFACES[name], name) for name in _TYPES}
        self._indices = indices
        scenario = component.get_export_index(SCENARIO_INTERFACE)
        self._parse_index = component.get_export_index("parse", scenario) if scenario is not None else None
        self._dead_letters = {name: export(DEAD_LETTERS_INTERFACE, name) for name in _DEAD_LETTER_FUNCS}
        self._lock = threading.Lock()
        # Idle instances (a small pool, as in the Rust host): concurrent callers
        # (fan-out branches on threads) each take one; ctypes releases the GIL
        # during the call, so they really run side by side.
        self._idle: List[_Instance] = [_Instance(self._compiled, indices, self._limits, self._dead_letters)]
        #: Run configurations the loop accepted (`check_config`), a bounded set.
        self._configs: Set[str] = set()

    @property
    def sha256(self) -> str:
        """The loop component's digest."""
        return self._compiled.sha256

    def _call(self, name: str, args: Tuple[bytes, ...], read: Callable[[int], Any]) -> Any:
        size = sum(map(len, args))
        limits = self._limits
        if size > limits.max_input_bytes:
            raise PolicyError(
                "too_large",
                f"`{name}` input is {size} bytes, over the {limits.max_input_bytes}-byte "
                "limit; keep step args and results smaller",
                code="input-too-large",
            )
        idle = self._idle
        try:
            inst = idle.pop()  # atomic (the GIL): no lock around the pool
        except IndexError:
            inst = _Instance(self._compiled, self._indices, limits, self._dead_letters)
        try:
            ok, value, message = read(inst.callers[name](limits.fuel_for(size), args))
        except _abi.Trapped as e:  # the instance is dropped: the next call gets a fresh one
            err = runtime_error(str(e))
            raise PolicyRuntimeError(
                err.kind, f"the recovery loop failed in `{name}`: {err.message}"
            ) from None
        except _abi.BadOutput as e:
            raise PolicyRuntimeError(
                "invalid_output", f"`{name}` of the recovery loop returned an unusable value ({e})"
            ) from None
        if len(idle) < _POOL:  # two threads may both append: the pool is small either way
            idle.append(inst)
        if ok:
            return value
        raise PolicyError(value, f"the recovery loop refused an input: {message}")

    def parse_scenario(self, text: str) -> Any:
        """`parse(text)` of `scenario@0.3.0`, through wasmtime-py's public API
        (it runs once per scenario): the plan as wasmtime lifts it (a `Record`
        per record, its fields by their WIT names) or the message of a
        scenario that is not valid (a `str`)."""
        if self._parse_index is None:
            raise PolicyRuntimeError(
                "incompatible",
                f"the reference component does not export `{SCENARIO_INTERFACE}#parse`; "
                "reinstall the package (`pip install ./python`)",
            )
        data = utf8(text, "scenario")
        try:
            inst = self._idle.pop()
        except IndexError:
            inst = _Instance(self._compiled, self._indices, self._limits, self._dead_letters)
        func = inst.instance.get_func(inst.store, self._parse_index)
        if func is None:
            raise PolicyRuntimeError("incompatible", f"`{SCENARIO_INTERFACE}#parse` is not a function; reinstall")
        try:
            inst.store.set_fuel(self._limits.fuel_for(len(data)))
            out = func(inst.store, data.decode("utf-8"))
        except WasmtimeError as e:  # the instance is dropped: the next call gets a fresh one
            err = runtime_error(str(e))
            raise PolicyRuntimeError(err.kind, f"the recovery loop failed in `parse`: {err.message}") from None
        if len(self._idle) < _POOL:
            self._idle.append(inst)
        if getattr(out, "tag", None) == "err":
            return str(out.payload.message)
        return out.payload

    def dead_letters(self, name: str, *args: Any) -> Any:
        """`dead-letters@0.3.0#name(*args)` through wasmtime-py's API: the
        value (a `result`'s ok payload, or a `wasmtime.component.Variant`
        when its ok and err cases are both records)."""
        idle = self._idle
        try:
            inst = idle.pop()
        except IndexError:
            inst = _Instance(self._compiled, self._indices, self._limits, self._dead_letters)
        size = sum(len(a) for a in args if isinstance(a, str))
        try:
            inst.store.set_fuel(self._limits.fuel_for(size))
            out = inst.dead_letters[name](inst.store, *args)
        except WasmtimeError as e:  # the instance is dropped: the next call gets a fresh one
            err = runtime_error(str(e))
            raise PolicyRuntimeError(
                err.kind, f"the recovery loop failed in `{name}`: {err.message}"
            ) from None
        if len(idle) < _POOL:
            idle.append(inst)
        return out

    def check_config(self, config: str, run_input: Callable[[], str]) -> None:
        """Have the loop check the run configuration `config` (JSON text) by
        starting a run with `run_input()`; a configuration it accepted once is
        not sent again (the loop's answer depends on the text alone)."""
        if config in self._configs:
            return
        self.advance("", run_input())
        with self._lock:
            if len(self._configs) >= _CONFIGS:
                self._configs.clear()
            self._configs.add(config)

    def advance(self, state: str, input: str) -> Tuple[str, str]:
        """`advance(state, input)` -> (new state, effects), both JSON text."""
        if type(state) is str and type(input) is str:
            try:  # the common case: text, encoded without `utf8`'s checks
                args = (state.encode("utf-8"), input.encode("utf-8"))
            except UnicodeEncodeError:  # `utf8` names what is wrong
                args = (utf8(state, "state"), utf8(input, "input"))
        else:
            args = (utf8(state, "state"), utf8(input, "input"))
        out: Tuple[str, str] = self._call("advance", args, _abi.read_advance)
        return out

    def map_lane_json(self, state: str, observations: str) -> Tuple[str, str]:
        """`map-lane-json(state, observations)` of `telemetry@0.3.0` -> (new
        state, instructions), both JSON text (docs/telemetry.md, "The mapping")."""
        out: Tuple[str, str] = self._call(
            "map-lane-json", (utf8(state, "state"), utf8(observations, "observations")), _abi.read_advance
        )
        return out

    def check_outcome(self, outcome: str) -> Optional[str]:
        """`check-outcome(outcome)`: the failure's envelope (JSON text), or None."""
        out: Optional[str] = self._call(
            "check-outcome", (utf8(outcome, "outcome"),), _abi.read_option_text
        )
        return out

    def render_named(self, envelope: str, format: str, options: str) -> str:
        """`render-named(envelope, format, options)`: the rendered text."""
        out: str = self._call(
            "render-named",
            (utf8(envelope, "envelope"), utf8(format, "format"), utf8(options, "options")),
            _abi.read_result_text,
        )
        return out
