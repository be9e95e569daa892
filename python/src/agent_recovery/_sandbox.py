"""One store and one instance of a component: the unit a trap poisons.

The component may import only `wasi:cli`, `wasi:io`, `wasi:clocks` and
`wasi:random` (`_component.check_imports` refuses anything else at load, so
`wasi:filesystem` and `wasi:sockets` never reach a call), and the WASI context
grants nothing: `WasiConfig()` with no environment variable, no argument,
stdin empty and stdout/stderr discarded; clocks and random are the host's
(the policy reads them only when the caller gave no `now_ms` / `seed`). As a
second line of defence there is no preopened directory, and (wasmtime's
default) no socket address and no name lookup.

Memory is capped by `Limits.memory_bytes`, and every call gets fuel for its
input size (see `limits`).
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, Optional, Sequence

from wasmtime import Store, WasiConfig, WasmtimeError
from wasmtime.component import Func, Record

from . import _abi
from ._component import EXPORTS, Compiled, check_exports, engine_and_linker
from .errors import PolicyError, PolicyRuntimeError
from .limits import Limits


def runtime_error(message: str) -> PolicyRuntimeError:
    """Name a wasmtime failure: fuel, or a trap."""
    kind = "out_of_fuel" if "all fuel consumed" in message else "trap"
    hint = (
        "; the input needs more fuel than Limits allows, raise fuel_base or fuel_per_byte"
        if kind == "out_of_fuel"
        else "; the instance was discarded and the next call starts a fresh one"
    )
    return PolicyRuntimeError(kind, message.splitlines()[-1].strip() + hint if message else kind)


def new_store(limits: Limits) -> Store:
    """A store with WASI and the sandbox's limits (memory, tables, fuel)."""
    engine, _ = engine_and_linker()
    store = Store(engine)
    store.set_wasi(WasiConfig())
    store.set_limits(
        memory_size=limits.memory_bytes,
        table_elements=100_000,
        instances=64,
        tables=64,
        memories=8,
    )
    store.set_fuel(limits.fuel_base)
    return store


class Sandbox:
    """A store, its instance and the instance's exported functions."""

    def __init__(self, compiled: Compiled, limits: Limits) -> None:
        _, linker = engine_and_linker()
        store = new_store(limits)
        try:
            instance = linker.instantiate(store, compiled.component)
        except WasmtimeError as e:
            text = str(e)
            if "all fuel consumed" in text:
                raise runtime_error(text) from None
            if "import" in text:
                kind, hint = "incompatible", "it may import only the WASI 0.2 interfaces"
            elif "memory" in text:
                kind, hint = "instantiate", "raise Limits.memory_bytes"
            else:
                kind, hint = "instantiate", "check that it is a recovery-policy component"
            raise PolicyRuntimeError(
                kind,
                f"the component (sha256 {compiled.sha256[:12]}…) could not be instantiated: "
                f"{text}; {hint}",
            ) from None
        funcs: Dict[str, Func] = {}
        for name, index in compiled.indices.items():
            func = instance.get_func(store, index)
            if func is None:
                raise PolicyRuntimeError(
                    "incompatible", f"export `{EXPORTS[name][1]}` is not a function; rebuild "
                    "the component against the contract's wit/"
                )
            funcs[name] = func
        check_exports(compiled, funcs, store)
        self.store = store
        self.limits = limits
        self._ctx = store._context()
        self._funcs = funcs
        # The JSON entry points' callers (`byref` objects keep the Func structs alive).
        self._callers: Dict[str, _abi.Caller] = {
            n: _abi.Caller(ctypes.byref(f._func), self._ctx, [_abi.KIND_STRING] * len(EXPORTS[n][2]))
            for n, f in funcs.items()
            if all(t in ("string", "enum") for t in EXPORTS[n][2])
        }
        self._plain = {n: EXPORTS[n][3] == "string" for n in funcs}
        #: Set when a call trapped: the instance must not be used again.
        self.poisoned = False

    def call_text(self, name: str, args: Sequence[_abi.Arg], size: int) -> str:
        """Call a JSON entry point (`size` bytes of input); return its text or
        raise `PolicyError`."""
        try:
            ok, value, message = _abi.call(
                self._callers[name], self.limits.fuel_for(size), args, self._plain[name]
            )
        except _abi.Trapped as e:
            self.poisoned = True
            raise runtime_error(str(e)) from None
        except _abi.BadOutput as e:
            self.poisoned = True
            raise PolicyRuntimeError(
                "invalid_output", f"`{EXPORTS[name][1]}` returned an unusable value ({e})"
            ) from None
        if ok:
            return value
        raise PolicyError(value, message)

    def call_typed(self, name: str, *args: Any) -> Any:
        """Call an export through wasmtime-py's public (converting) API."""
        try:
            self.store.set_fuel(self.limits.fuel_base)
            out = self._funcs[name](self.store, *args)
        except WasmtimeError as e:
            self.poisoned = True
            raise runtime_error(str(e)) from None
        if EXPORTS[name][3].startswith("result<") and isinstance(out, Record):
            # result<T, policy-error>: an Err comes back as a plain Record.
            kind, message = getattr(out, "kind", "internal"), getattr(out, "message", "")
            raise PolicyError(str(kind).replace("-", "_"), str(message))
        return out


def record(fields: Optional[Dict[str, Any]]) -> Optional[Record]:
    """A wasmtime `Record` with kebab-case attributes, or None."""
    if fields is None:
        return None
    out = Record()
    for key, value in fields.items():
        setattr(out, key.replace("_", "-"), value)
    return out
