"""Compiling components, once per process and digest, and checking their exports.

One `wasmtime.Engine` (with fuel metering) and one `Linker` (WASI 0.2 only)
serve every policy in the process. Compiling a component takes about a second,
so compiled components are kept by sha256 (a few at most): loading or swapping
to bytes already seen skips the compiler.

Across processes, set `AGENT_RECOVERY_COMPILE_CACHE=1` (before the first load)
to turn on wasmtime's own compilation cache (in `~/.cache/wasmtime`), or set it
to the path of a wasmtime cache configuration file. Off by default: a library
should not write to the user's home unasked.

The cache holds native code that wasmtime loads without the sandbox's checks,
so, as the Rust host does for its own cache, the cache directory (the default
`$XDG_CACHE_HOME/wasmtime` or `~/.cache/wasmtime`, or the configuration file's
`[cache] directory`) is created `0700` when missing and **refused**
(`PolicyRuntimeError("invalid_argument")`, code `invalid-argument`) when it is
not owned by the process's user or is writable by its group or others.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from wasmtime import Config, Engine, WasmtimeError
from wasmtime.component import (
    Component,
    EnumType,
    ExportIndex,
    Func,
    Linker,
    ListType,
    OptionType,
    RecordType,
    ResultType,
    TupleType,
)

from .errors import PolicyRuntimeError

#: The WIT package every export lives in.
PACKAGE = "agent:recovery"
#: The contract version this host speaks (interface names carry it).
CONTRACT = "0.1.0"

_POLICY_ERROR = "record{kind:enum,message:string}"
_BACKOFF = "option<record{base-ms:u64,cap-ms:u64,max-attempts:u32}>"
_POLICY_CONFIG = (
    f"option<record{{tool:{_BACKOFF},llm:{_BACKOFF},agent:{_BACKOFF},"
    "retry-budget-ms:option<u64>}>"
)

#: name -> (interface, function, parameter shapes, result shape). The shapes are
#: written in the notation of `shape()`; enum cases are not compared.
EXPORTS: Dict[str, Tuple[str, str, Tuple[str, ...], str]] = {
    "classify-json": ("classify", "classify-json", ("string",), f"result<string,{_POLICY_ERROR}>"),
    "decide-json": ("decide", "decide-json", ("string", "string"), f"result<string,{_POLICY_ERROR}>"),
    "key": ("idempotency", "key", ("string",) * 4, f"result<string,{_POLICY_ERROR}>"),
    "render-json": (
        "render",
        "render-json",
        ("string", "enum", "string"),
        f"result<string,{_POLICY_ERROR}>",
    ),
    "codes-json": ("registry", "codes-json", (), "string"),
    "errors-block": ("registry", "errors-block", ("list<string>",), "string"),
    "delay": (
        "backoff",
        "delay",
        ("enum", "u32", "option<u64>", _POLICY_CONFIG),
        f"result<u64,{_POLICY_ERROR}>",
    ),
    "info": (
        "meta",
        "info",
        (),
        "record{name:string,version:string,contract:string,description:string}",
    ),
    "smoke-tests": ("meta", "smoke-tests", (), "string"),
}


def shape(ty: Any) -> str:
    """A compact structural description of a component value type."""
    if isinstance(ty, RecordType):
        return "record{" + ",".join(f"{n}:{shape(t)}" for n, t in ty.fields) + "}"
    if isinstance(ty, ResultType):
        ok, err = ty.ok, ty.err
        return f"result<{shape(ok) if ok else '_'},{shape(err) if err else '_'}>"
    if isinstance(ty, OptionType):
        return f"option<{shape(ty.payload)}>"
    if isinstance(ty, ListType):
        return f"list<{shape(ty.element)}>"
    if isinstance(ty, TupleType):
        return "tuple<" + ",".join(shape(t) for t in ty.elements) + ">"
    if isinstance(ty, EnumType):
        return "enum"
    return type(ty).__name__.lower()


_lock = threading.Lock()
_engine: Optional[Engine] = None
_linker: Optional[Linker] = None
_compiled: "OrderedDict[str, Compiled]" = OrderedDict()
_MAX_COMPILED = 8


def engine_and_linker() -> Tuple[Engine, Linker]:
    """The process-wide engine (fuel metering on) and its WASI 0.2 linker."""
    global _engine, _linker
    with _lock:
        if _engine is None or _linker is None:
            config = Config()
            config.consume_fuel = True
            cache = os.environ.get("AGENT_RECOVERY_COMPILE_CACHE", "").strip()
            if not cache:
                # On by default (a cold start compiles for ~1.5 s, a
                # cached one loads in ~0.2 s), in wasmtime's default directory,
                # unless that directory is unsafe: then compile every time and
                # say why once, instead of failing a caller who asked for nothing.
                try:
                    check_cache_dir(default_cache_dir())
                    config.cache = True
                except PolicyRuntimeError as e:
                    warnings.warn(f"agent-recovery: compiling without a cache: {e}", RuntimeWarning, stacklevel=2)
            elif cache.lower() in ("1", "true", "yes", "on"):
                check_cache_dir(default_cache_dir())
                config.cache = True
            elif cache.lower() not in ("0", "false", "no", "off"):
                configured = configured_cache_dir(cache)
                check_cache_dir(configured or default_cache_dir())
                config.cache = cache  # a wasmtime cache configuration file
            engine = Engine(config)
            linker = Linker(engine)
            linker.add_wasip2()
            _engine, _linker = engine, linker
        return _engine, _linker


def default_cache_dir() -> Path:
    """wasmtime's default cache directory on Linux and macOS-like systems."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "wasmtime"


def configured_cache_dir(config_file: str) -> "Path | None":
    """The `[cache] directory` of a wasmtime cache configuration file, if set."""
    import tomllib  # only for a configuration file: not on every import

    try:
        with open(config_file, "rb") as f:
            directory = tomllib.load(f).get("cache", {}).get("directory")
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise PolicyRuntimeError(
            "invalid_argument",
            f"cannot read the wasmtime cache configuration {config_file!r} ({e}); "
            "fix AGENT_RECOVERY_COMPILE_CACHE",
        ) from None
    return Path(directory) if isinstance(directory, str) else None


def check_cache_dir(directory: Path) -> None:
    """Create `directory` owner-only when missing; refuse it when anyone but its
    owner could write compiled code there (or it is not ours)."""
    if not hasattr(os, "geteuid"):
        return  # not Unix: permissions are not checked
    if not directory.exists():
        try:
            directory.mkdir(mode=0o700, parents=True)
        except OSError:
            return  # wasmtime will fail to write and skip the cache
    st = directory.stat()
    why = ""
    if not stat.S_ISDIR(st.st_mode):
        why = "it is not a directory"
    elif st.st_uid != os.geteuid():
        why = f"it is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif st.st_mode & 0o022:
        why = f"it is writable by its group or by others (mode {st.st_mode & 0o777:03o})"
    if why:
        raise PolicyRuntimeError(
            "invalid_argument",
            f"refusing the compiled-component cache {str(directory)!r}: {why}; its entries "
            "are loaded as native code, so only its owner may write there: `chmod 700` it, "
            "or unset AGENT_RECOVERY_COMPILE_CACHE",
        )


#: Where `pip install` puts `<sha256>.cwasm`, the packaged reference compiled
#: for the installing machine (python/setup.py).
PRECOMPILED_DIR = Path(__file__).with_name("_wasm")


def load_precompiled(engine: Engine, digest: str) -> Optional[Component]:
    """The package's precompiled artifact for the component with this sha256,
    or None. Only the package's own directory is read (as trusted as this
    file), and only a name made of the digest of the bytes being loaded, so a
    stale artifact never matches; wasmtime refuses one built by another
    wasmtime version, for another CPU or with another engine configuration
    (then the caller compiles). `AGENT_RECOVERY_PRECOMPILED=0` skips it."""
    if os.environ.get("AGENT_RECOVERY_PRECOMPILED", "").strip().lower() in ("0", "false", "no", "off"):
        return None
    path = PRECOMPILED_DIR / f"{digest}.cwasm"
    if not path.is_file():
        return None
    try:
        return Component.deserialize_file(engine, str(path))
    except WasmtimeError:
        return None


@dataclass
class Compiled:
    """A compiled component, its digest and the indices of its exports."""

    component: Component
    sha256: str
    size: int
    indices: Dict[str, ExportIndex] = field(default_factory=dict)
    #: True when it came from the package's precompiled artifact, not the compiler.
    precompiled: bool = False
    #: Set once the export shapes were checked against `EXPORTS`.
    checked: bool = False


def compile_component(wasm: bytes, digest: Optional[str] = None) -> Compiled:
    """Compile `wasm` (or take it from the per-process cache by its sha256)."""
    if digest is None:
        digest = hashlib.sha256(wasm).hexdigest()
    with _lock:
        hit = _compiled.get(digest)
        if hit is not None:
            _compiled.move_to_end(digest)
            return hit
    if wasm[:8] == b"\0asm\x01\0\0\0":
        raise PolicyRuntimeError(
            "load",
            "the policy is a core WebAssembly module, not a component; build it for "
            "wasm32-wasip2 (or wrap it with `wasm-tools component new`)",
        )
    if not wasm.startswith(b"\0asm"):
        raise PolicyRuntimeError(
            "load",
            f"the {len(wasm)}-byte file (sha256 {digest[:12]}…) is not a WebAssembly binary "
            "(it does not start with \\0asm); pass the .wasm that "
            "`cargo build --target wasm32-wasip2` writes",
        )
    engine, _ = engine_and_linker()
    component = load_precompiled(engine, digest)
    precompiled = component is not None
    try:
        if component is None:
            component = Component(engine, wasm)
    except WasmtimeError as e:
        raise PolicyRuntimeError(
            "load",
            f"the {len(wasm)}-byte file (sha256 {digest[:12]}…) is not a WebAssembly "
            f"component wasmtime can compile ({e}); build it with "
            "`cargo build --target wasm32-wasip2`",
        ) from None
    check_imports(component, engine)
    compiled = Compiled(component, digest, len(wasm), precompiled=precompiled)
    for name, (interface, func, _, _) in EXPORTS.items():
        qualified = f"{PACKAGE}/{interface}@{CONTRACT}"
        iface = component.get_export_index(qualified)
        index = component.get_export_index(func, iface) if iface is not None else None
        if index is None:
            raise PolicyRuntimeError(
                "incompatible",
                f"the component does not export `{qualified}#{func}`; build it against "
                f"the WIT world {PACKAGE}/recovery-policy@{CONTRACT}",
            )
        compiled.indices[name] = index
    with _lock:
        _compiled[digest] = compiled
        while len(_compiled) > _MAX_COMPILED:
            _compiled.popitem(last=False)
    return compiled


#: WASI packages a component may import: the same allow-list as the Rust host.
#: A policy is a pure computation: Rust's standard library needs stdio (panic
#: output), clocks and random, nothing else. `wasi:filesystem`, `wasi:sockets`
#: and anything else are refused at load, not merely linked to nothing.
ALLOWED_IMPORTS = (
    "wasi:cli/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
)


def check_imports(component: Component, engine: Engine) -> None:
    """Refuse a component importing anything outside `ALLOWED_IMPORTS`, naming every such import."""
    denied = [name for name in component.type.imports(engine) if not name.startswith(ALLOWED_IMPORTS)]
    if denied:
        names = ", ".join(f"`{name}`" for name in denied)
        raise PolicyRuntimeError(
            "incompatible",
            f"the component imports {names}, which a policy is not granted; a policy may import "
            "only wasi:cli, wasi:io, wasi:clocks and wasi:random (no filesystem, no network): "
            "remove the code that uses them (e.g. std::fs, std::net) and rebuild",
        )


def check_exports(compiled: Compiled, funcs: Dict[str, Func], store: Any) -> None:
    """Compare every export's type with `EXPORTS`; raise `incompatible` if one differs."""
    if compiled.checked:
        return
    for name, (interface, func_name, params, result) in EXPORTS.items():
        fty = funcs[name].type(store)
        got_params = tuple(shape(t) for _, t in fty.params)
        res = fty.result
        got_result = shape(res) if res is not None else "_"
        if got_params != params or got_result != result:
            raise PolicyRuntimeError(
                "incompatible",
                f"`{PACKAGE}/{interface}@{CONTRACT}#{func_name}` has type "
                f"({', '.join(got_params)}) -> {got_result}, the contract says "
                f"({', '.join(params)}) -> {result}; rebuild the component against "
                f"wit/ of contract {CONTRACT}",
            )
    compiled.checked = True

