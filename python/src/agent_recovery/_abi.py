"""Calls into the component without wasmtime-py's per-call type walk.

Why this module exists: `wasmtime.component.Func.__call__` asks the C API for
the function's type on every call, rebuilds Python type objects for each
parameter and for the result, and walks them again to lift the result (a
`result<string, policy-error>` costs a dozen FFI round trips before and after
the call itself). For the JSON entry points, whose parameters are strings (and
one enum) and whose result is `result<string, policy-error>` or `string`, this
module lowers the arguments straight into `wasmtime_component_val_t`s, calls
`wasmtime_component_func_call`, reads the result in place and frees it with one
`wasmtime_component_val_delete`. Everything else goes through the public API.

It uses wasmtime-py's private `_ffi` module, which is why `pyproject.toml` pins
`wasmtime` to one major version. Reading is defensive: every value's `kind` is
checked before its union member is read, and the shapes of the exports are
checked once per component (`_component.check_exports`), so a component with
other types gets a `PolicyRuntimeError("incompatible")`, never a misread.

Ownership, from wasmtime's `crates/c-api/src/component/func.rs`: the C API only
*reads* parameters (it copies them into Rust values), so a string parameter
points straight into the Python `bytes` and is never freed by us; it *assigns*
results (`*c_val = ...` drops the previous value), so every call gets a fresh,
zeroed result, freed once with `wasmtime_component_val_delete`. Reusing a freed
result double-frees. Strings handed to the C API must be valid UTF-8 (it
unwraps `String::from_utf8`); `_inputs.utf8` checks that before every call.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, byref, c_char_p, c_size_t, string_at
from typing import Any, Callable, Sequence, Tuple

from wasmtime import WasmtimeError, _ffi as ffi

_Val = ffi.wasmtime_component_val_t
_ByteVec = ffi.wasm_byte_vec_t

KIND_STRING = ffi.WASMTIME_COMPONENT_STRING.value
KIND_RECORD = ffi.WASMTIME_COMPONENT_RECORD.value
KIND_ENUM = ffi.WASMTIME_COMPONENT_ENUM.value
KIND_RESULT = ffi.WASMTIME_COMPONENT_RESULT.value
KIND_OPTION = ffi.WASMTIME_COMPONENT_OPTION.value


class _Arg(ctypes.Structure):
    """A `string` (or `enum`) parameter laid out as a `wasmtime_component_val_t`.

    The C API only reads parameters (it copies them into Rust values), so the
    bytes stay in Python's own buffer: no `wasm_byte_vec_new`, no copy, no
    `wasmtime_component_val_delete` for parameters.
    """

    _fields_ = [
        ("kind", ctypes.c_uint8),
        ("size", c_size_t),
        ("data", c_char_p),
        ("_pad", ctypes.c_uint8 * (ctypes.sizeof(_Val) - _Val.of.offset - ctypes.sizeof(_ByteVec))),
    ]


# The layout must match the union's `string` / `enumeration` member exactly.
assert ctypes.sizeof(_Arg) == ctypes.sizeof(_Val)
assert _Arg.size.offset == _Val.of.offset + _ByteVec.size.offset  # type: ignore[attr-defined]
assert _Arg.data.offset == _Val.of.offset + _ByteVec.data.offset  # type: ignore[attr-defined]
_ARRAYS = [_Arg * n for n in range(5)]


# Private function objects (CDLL.__getitem__ makes new ones), so changing their
# argtypes cannot affect wasmtime-py's own bindings.
_func_call = ffi.dll["wasmtime_component_func_call"]
_func_call.restype = POINTER(ffi.wasmtime_error_t)
_func_call.argtypes = [
    POINTER(ffi.wasmtime_component_func_t),
    POINTER(ffi.wasmtime_context_t),
    POINTER(_Arg),
    c_size_t,
    POINTER(_Val),
    c_size_t,
]

_val_delete = ffi.dll["wasmtime_component_val_delete"]
_val_delete.restype = None
_val_delete.argtypes = [POINTER(_Val)]

_set_fuel = ffi.dll["wasmtime_context_set_fuel"]
_set_fuel.restype = POINTER(ffi.wasmtime_error_t)
_set_fuel.argtypes = [POINTER(ffi.wasmtime_context_t), ctypes.c_uint64]

#: An argument: (KIND_STRING or KIND_ENUM, UTF-8 bytes).
Arg = Tuple[int, bytes]

#: The outcome of a call: (True, text, "") or (False, error kind, message).
Outcome = Tuple[bool, str, str]


class Trapped(Exception):
    """The call failed inside wasmtime (trap, fuel, bad argument types)."""


class BadOutput(Exception):
    """The component returned a value of an unexpected shape."""


def _text(vec: _ByteVec) -> str:
    size = vec.size
    if size == 0:
        return ""
    return string_at(vec.data, size).decode("utf-8")


def _error(ptr: "ctypes._Pointer[ffi.wasmtime_error_t]") -> Trapped:
    return Trapped(str(WasmtimeError._from_ptr(ptr)))


def set_fuel(ctx: "ctypes._Pointer[ffi.wasmtime_context_t]", fuel: int) -> None:
    """Give the store `fuel` units for the next call."""
    err = _set_fuel(ctx, fuel)
    if err:
        raise _error(err)


def call(
    func: "ctypes._CArgObject",
    ctx: "ctypes._Pointer[ffi.wasmtime_context_t]",
    args: Sequence[Arg],
    result_is_plain_string: bool,
) -> Outcome:
    """Call `func` (a `byref` to a `wasmtime_component_func_t`) with `args`.

    The result is `result<string, policy-error>` unless `result_is_plain_string`.
    """
    n = len(args)
    params = _ARRAYS[n](*[_Arg(kind, len(data), data) for kind, data in args]) if n else None
    result = _Val()  # fresh and zeroed: the C API overwrites it without reading it
    err = _func_call(func, ctx, params, n, byref(result), 1)
    if err:
        raise _error(err)
    try:
        return _read(result, result_is_plain_string)
    finally:
        _val_delete(byref(result))


def call_strings(
    func: "ctypes._CArgObject",
    ctx: "ctypes._Pointer[ffi.wasmtime_context_t]",
    args: Tuple[bytes, ...],
    read: Callable[[_Val], Any],
) -> Any:
    """Call `func`, whose parameters are all strings (the loop's exports), with
    `args`, the result read by `read` (before it is freed). The parameters are
    written into one array in place, without an `_Arg` object and a list per call."""
    n = len(args)
    params = _ARRAYS[n]()
    for i in range(n):
        param = params[i]
        data = args[i]
        param.kind = KIND_STRING
        param.size = len(data)
        param.data = data
    result = _Val()
    err = _func_call(func, ctx, params, n, byref(result), 1)
    if err:
        raise _error(err)
    try:
        return read(result)
    finally:
        _val_delete(byref(result))


def _policy_error(payload: _Val) -> Tuple[bool, Any, str]:
    if payload.kind != KIND_RECORD:
        raise BadOutput(f"expected err(policy-error), got value kind {payload.kind}")
    kind = message = None
    record = payload.of.record
    for i in range(record.size):
        entry = record.data[i]
        name = _text(entry.name)
        if name == "kind" and entry.val.kind == KIND_ENUM:
            kind = _text(entry.val.of.enumeration)
        elif name == "message" and entry.val.kind == KIND_STRING:
            message = _text(entry.val.of.string)
    if kind is None or message is None:
        raise BadOutput("the policy-error has no kind or no message")
    return False, kind.replace("-", "_"), message


def _result_payload(result: _Val) -> Tuple[bool, Any]:
    if result.kind != KIND_RESULT:
        raise BadOutput(f"expected a result, got value kind {result.kind}")
    res = result.of.result
    if not res.val:
        raise BadOutput("the result carries no payload")
    return bool(res.is_ok), res.val.contents


def read_advance(result: _Val) -> Tuple[bool, Any, str]:
    """`result<record{state: string, effects: string}, policy-error>`:
    (True, (state, effects), "") or (False, error kind, message)."""
    ok, payload = _result_payload(result)
    if not ok:
        return _policy_error(payload)
    if payload.kind != KIND_RECORD:
        raise BadOutput(f"expected ok(record), got value kind {payload.kind}")
    # The export's type was checked against `record{state: string, effects:
    # string}` (names and order) when the instance was made, so the fields are
    # read by position, without reading their names back on every call.
    record = payload.of.record
    if record.size != 2:
        raise BadOutput(f"the advance-result has {record.size} fields, not 2 (state, effects)")
    state, effects = record.data[0].val, record.data[1].val
    if state.kind != KIND_STRING or effects.kind != KIND_STRING:
        raise BadOutput("the advance-result's state or effects is not a string")
    return True, (_text(state.of.string), _text(effects.of.string)), ""


def read_option_text(result: _Val) -> Tuple[bool, Any, str]:
    """`result<option<string>, policy-error>`: (True, text or None, "") or an error."""
    ok, payload = _result_payload(result)
    if not ok:
        return _policy_error(payload)
    if payload.kind != KIND_OPTION:
        raise BadOutput(f"expected ok(option), got value kind {payload.kind}")
    inner = payload.of.option
    if not inner:
        return True, None, ""
    if inner.contents.kind != KIND_STRING:
        raise BadOutput(f"expected option<string>, got value kind {inner.contents.kind}")
    return True, _text(inner.contents.of.string), ""


def read_result_text(result: _Val) -> Tuple[bool, Any, str]:
    """`result<string, policy-error>`: (True, text, "") or an error."""
    return _read(result, False)


def _read(result: _Val, plain: bool) -> Outcome:
    if plain:
        if result.kind != KIND_STRING:
            raise BadOutput(f"expected a string, got value kind {result.kind}")
        return True, _text(result.of.string), ""
    ok, payload = _result_payload(result)
    if not ok:
        return _policy_error(payload)
    if payload.kind != KIND_STRING:
        raise BadOutput(f"expected ok(string), got value kind {payload.kind}")
    return True, _text(payload.of.string), ""
