"""Calls into the component without wasmtime-py's per-call type walk.

Why this module exists: `wasmtime.component.Func.__call__` asks the C API for
the function's type on every call, rebuilds Python type objects for each
parameter and for the result, and walks them again to lift the result (a
`result<string, policy-error>` costs a dozen FFI round trips before and after
the call itself). For the JSON entry points, whose parameters are strings (and
one enum) and whose result is `result<string, policy-error>` or `string`, this
module lowers the arguments straight into `wasmtime_component_val_t`s, calls
`wasmtime_component_func_call` and reads the result in place. Everything else
goes through the public API.

A call is two foreign calls (`wasmtime_context_set_fuel`, then
`wasmtime_component_func_call`): a `Caller` keeps its parameter array and its
result value for the life of its instance, and the result is read with
`struct.unpack_from` at its address through one memoryview that spans the
address space (`_MEM`), so reading a field costs no foreign call and no ctypes
object. The addresses read are the ones wasmtime just wrote, and a union
member is read only after its value's `kind` was checked, as a ctypes field
access would be; a wrong address would crash either way.

It uses wasmtime-py's private `_ffi` module, which is why `pyproject.toml` pins
`wasmtime` to one major version; the layout the readers assume is checked
against `_ffi`'s structures at import. Reading is defensive: every value's
`kind` is checked before its union member is read, and the shapes of the
exports are checked once per component (`_component.check_exports`), so a
component with other types gets a `PolicyRuntimeError("incompatible")`, never a
misread.

Ownership, from wasmtime's `crates/c-api/src/component/func.rs`: the C API only
*reads* parameters (it copies them into Rust values), so a string parameter
points straight into the Python `bytes` (the parameter array keeps it alive
until the next call) and is never freed by us; it *assigns* results
(`*c_val = ...` drops the previous value, and a failed call assigns nothing),
so a `Caller`'s result, zeroed at first, is freed by the next call's
assignment, and the last one by `wasmtime_component_val_delete` when the
`Caller` is collected. A result is never deleted and then reused (that would
double-free). Strings handed to the C API must be valid UTF-8 (it unwraps
`String::from_utf8`); `_inputs.utf8` checks that before every call.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import weakref
from ctypes import POINTER, byref, c_char_p, c_size_t
from typing import Any, Sequence, Tuple

from wasmtime import WasmtimeError, _ffi as ffi

_Val = ffi.wasmtime_component_val_t
_ByteVec = ffi.wasm_byte_vec_t
_Entry = ffi.wasmtime_component_valrecord_entry
_ValResult = ffi.wasmtime_component_valresult
_ValRecord = ffi.wasmtime_component_valrecord_t

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

# -- reading values in place --------------------------------------------------

#: Every byte of the address space, as one read-only-by-convention buffer: a
#: value at address `a` is `struct.unpack_from(fmt, _MEM, a)`, a string
#: `str(_MEM[a:a + n], "utf-8")` (decoded straight from wasmtime's buffer).
_MEM = memoryview((ctypes.c_ubyte * (sys.maxsize >> 1)).from_address(0))

_OF = _Val.of.offset
_ENTRY_SIZE = ctypes.sizeof(_Entry)
_ENTRY_VAL = _Entry.val.offset
_ENTRY_NAME = _Entry.name.offset

#: The readers below assume this layout (checked against `_ffi`'s structures):
#: `kind` a byte at 0; the union at 8; a string / enum / record / list member
#: is (size, pointer); a result is (is_ok byte, padding, pointer to the
#: payload); an option a pointer.
assert sys.byteorder == "little" and ctypes.sizeof(ctypes.c_void_p) == 8
assert _Val.kind.offset == 0 and _OF == 8
assert _ByteVec.size.offset == 0 and _ByteVec.data.offset == 8  # type: ignore[attr-defined]
assert _ValRecord.size.offset == 0 and _ValRecord.data.offset == 8  # type: ignore[attr-defined]
assert _ValResult.is_ok.offset == 0 and _ValResult.val.offset == 8  # type: ignore[attr-defined]
assert _ENTRY_NAME == 0 and ctypes.sizeof(ffi.wasm_name_t) == 16

#: (kind, size, pointer): a string, an enum or a record.
_SIZED = struct.Struct("<B7xQQ")
#: (kind, is_ok, pointer to the payload): a result.
_RESULT = struct.Struct("<B7x?7xQ")
#: (kind, pointer): an option.
_POINTER = struct.Struct("<B7xQ")
#: Two record entries: (name size, name pointer, kind, size, pointer) each.
_TWO_ENTRIES = struct.Struct("<" + "QQB7xQQ" + f"{_ENTRY_SIZE - _ENTRY_VAL - 24}x" + "QQB7xQQ")
assert _TWO_ENTRIES.size == 2 * _ENTRY_SIZE - (_ENTRY_SIZE - _ENTRY_VAL - 24)
#: (size, pointer): a record entry's name.
_NAME = struct.Struct("<QQ")


def _str_at(size: int, data: int) -> str:
    if size == 0:
        return ""
    return str(_MEM[data : data + size], "utf-8")


# -- the calls -----------------------------------------------------------------

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

# The same two functions without `argtypes`, for `Caller`: every argument it
# passes is already a ctypes object of the parameter's exact C type (pointers,
# `c_size_t`, `c_uint64`), so ctypes passes them as they are instead of
# converting each through its `from_param` on every call.
_func_call_exact = ffi.dll["wasmtime_component_func_call"]
_func_call_exact.restype = POINTER(ffi.wasmtime_error_t)
_set_fuel_exact = ffi.dll["wasmtime_context_set_fuel"]
_set_fuel_exact.restype = POINTER(ffi.wasmtime_error_t)
_ONE = c_size_t(1)

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


def _error(ptr: "ctypes._Pointer[ffi.wasmtime_error_t]") -> Trapped:
    return Trapped(str(WasmtimeError._from_ptr(ptr)))


def set_fuel(ctx: "ctypes._Pointer[ffi.wasmtime_context_t]", fuel: int) -> None:
    """Give the store `fuel` units for the next call."""
    err = _set_fuel(ctx, fuel)
    if err:
        raise _error(err)


class Caller:
    """Calls of one export of one instance: its parameter array and its result
    are made once and reused (not thread-safe: an instance serves one caller
    at a time). `read(address)` reads the result before the next call."""

    __slots__ = ("_func", "_ctx", "_n", "_count", "_params", "_slots", "_result", "_ref", "_at", "__weakref__")

    def __init__(
        self,
        func: "ctypes._CArgObject",
        ctx: "ctypes._Pointer[ffi.wasmtime_context_t]",
        kinds: Sequence[int],
    ) -> None:
        self._func = func
        self._ctx = ctx
        self._n = n = len(kinds)
        self._count = c_size_t(n)
        self._params = _ARRAYS[n]() if n else None
        self._slots = [self._params[i] for i in range(n)] if n else []  # type: ignore[index]
        for slot, kind in zip(self._slots, kinds, strict=True):
            slot.kind = kind
        self._result = _Val()  # zeroed: a `bool`, which the first assignment drops as nothing
        self._ref = byref(self._result)
        self._at = ctypes.addressof(self._result)
        # The last result is freed when the caller goes (not at exit: wasmtime may be gone).
        weakref.finalize(self, _val_delete, self._ref).atexit = False

    def __call__(self, fuel: int, args: Sequence[bytes]) -> int:
        """Call with `fuel` units and `args` (one bytes per parameter); the
        address of the result, valid until the next call."""
        slots = self._slots
        for i in range(self._n):
            slot = slots[i]
            data = args[i]
            slot.size = len(data)
            slot.data = data
        err = _set_fuel_exact(self._ctx, ctypes.c_uint64(fuel))
        if err:
            raise _error(err)
        err = _func_call_exact(self._func, self._ctx, self._params, self._count, self._ref, _ONE)
        if err:
            raise _error(err)
        return self._at

    def set_kinds(self, kinds: Sequence[int]) -> None:
        """The parameters' kinds (`KIND_STRING` or `KIND_ENUM`), when they change."""
        for slot, kind in zip(self._slots, kinds, strict=True):
            slot.kind = kind


def call(caller: Caller, fuel: int, args: Sequence[Arg], result_is_plain_string: bool) -> Outcome:
    """Call through `caller` with `args` ((kind, bytes) pairs).

    The result is `result<string, policy-error>` unless `result_is_plain_string`.
    """
    caller.set_kinds([kind for kind, _ in args])
    at = caller(fuel, [data for _, data in args])
    return read_text_at(at) if result_is_plain_string else read_result_text(at)


def _policy_error(at: int) -> Tuple[bool, Any, str]:
    kind_, size, data = _SIZED.unpack_from(_MEM, at)
    if kind_ != KIND_RECORD:
        raise BadOutput(f"expected err(policy-error), got value kind {kind_}")
    kind = message = None
    for i in range(size):
        entry = data + i * _ENTRY_SIZE
        name = _str_at(*_NAME.unpack_from(_MEM, entry + _ENTRY_NAME))
        vkind, vsize, vdata = _SIZED.unpack_from(_MEM, entry + _ENTRY_VAL)
        if name == "kind" and vkind == KIND_ENUM:
            kind = _str_at(vsize, vdata)
        elif name == "message" and vkind == KIND_STRING:
            message = _str_at(vsize, vdata)
    if kind is None or message is None:
        raise BadOutput("the policy-error has no kind or no message")
    return False, kind.replace("-", "_"), message


def _result_payload(at: int) -> Tuple[bool, int]:
    kind, is_ok, payload = _RESULT.unpack_from(_MEM, at)
    if kind != KIND_RESULT:
        raise BadOutput(f"expected a result, got value kind {kind}")
    if not payload:
        raise BadOutput("the result carries no payload")
    return is_ok, payload


def read_advance(at: int) -> Tuple[bool, Any, str]:
    """`result<record{state: string, effects: string}, policy-error>` at `at`:
    (True, (state, effects), "") or (False, error kind, message)."""
    ok, payload = _result_payload(at)
    if not ok:
        return _policy_error(payload)
    kind, size, data = _SIZED.unpack_from(_MEM, payload)
    if kind != KIND_RECORD:
        raise BadOutput(f"expected ok(record), got value kind {kind}")
    # The export's type was checked against `record{state: string, effects:
    # string}` (names and order) when the instance was made, so the fields are
    # read by position, without reading their names back on every call.
    if size != 2:
        raise BadOutput(f"the advance-result has {size} fields, not 2 (state, effects)")
    _, _, skind, ssize, sdata, _, _, ekind, esize, edata = _TWO_ENTRIES.unpack_from(_MEM, data)
    if skind != KIND_STRING or ekind != KIND_STRING:
        raise BadOutput("the advance-result's state or effects is not a string")
    # `_str_at`, inlined (the hottest read: every `advance`).
    state = str(_MEM[sdata : sdata + ssize], "utf-8") if ssize else ""
    effects = str(_MEM[edata : edata + esize], "utf-8") if esize else ""
    return True, (state, effects), ""


def read_option_text(at: int) -> Tuple[bool, Any, str]:
    """`result<option<string>, policy-error>` at `at`: (True, text or None, "") or an error."""
    ok, payload = _result_payload(at)
    if not ok:
        return _policy_error(payload)
    kind, inner = _POINTER.unpack_from(_MEM, payload)
    if kind != KIND_OPTION:
        raise BadOutput(f"expected ok(option), got value kind {kind}")
    if not inner:
        return True, None, ""
    ikind, size, data = _SIZED.unpack_from(_MEM, inner)
    if ikind != KIND_STRING:
        raise BadOutput(f"expected option<string>, got value kind {ikind}")
    return True, _str_at(size, data), ""


def read_result_text(at: int) -> Outcome:
    """`result<string, policy-error>` at `at`: (True, text, "") or an error."""
    ok, payload = _result_payload(at)
    if not ok:
        return _policy_error(payload)
    kind, size, data = _SIZED.unpack_from(_MEM, payload)
    if kind != KIND_STRING:
        raise BadOutput(f"expected ok(string), got value kind {kind}")
    return True, _str_at(size, data), ""


def read_text_at(at: int) -> Outcome:
    """`string` at `at`: (True, text, "")."""
    kind, size, data = _SIZED.unpack_from(_MEM, at)
    if kind != KIND_STRING:
        raise BadOutput(f"expected a string, got value kind {kind}")
    return True, _str_at(size, data), ""
