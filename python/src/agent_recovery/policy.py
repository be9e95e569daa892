"""`Policy`: one recovery policy component, loaded and ready to answer.

```python
from agent_recovery import Policy

policy = Policy.load()  # the packaged reference component
decision = policy.decide(
    {"source": "http", "status": 429, "headers": {"retry-after": "2"}},
    {"call": "tool", "attempt": 1, "seed": 7},
)
assert decision["action"] == "retry" and decision["delay_ms"] == 2000
```

The dict-returning methods are `json.loads` of the JSON entry points, so
Python, Rust and Node see the same data; `classify_json` / `decide_json` return
the component's own text, byte for byte. Calls are serialized by a lock
(wasmtime stores are not thread-safe); a call that traps drops its instance and
the next call instantiates the component again.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union, cast, get_args

from . import _abi
from ._component import Compiled, compile_component
from ._inputs import U32, U64, check_size, integer, json_text, text_only, utf8
from ._sandbox import Sandbox, record
from .errors import PolicyError, PolicyRuntimeError
from .limits import Limits
from .types import (
    CallKind,
    CodeInfo,
    Decision,
    Envelope,
    PolicyConfig,
    PolicyInfo,
    PolicyRef,
    RenderFormat,
)

if TYPE_CHECKING:
    from .signing import TrustedKey

#: What `Policy.load` accepts: a path, the component's bytes, or None (reference).
Source = Union[None, str, "os.PathLike[str]", bytes, bytearray, memoryview]

#: The contract versions this host speaks (semver-compatible with 0.1.0).
CONTRACT_PREFIX = "0.1."

#: The render formats of the WIT `render-format` enum (the `RenderFormat` type's values).
RENDER_FORMATS: tuple[str, ...] = get_args(RenderFormat)

_CALLS: tuple[str, ...] = get_args(CallKind)
_WASM_NAME = "agent_recovery_policy.wasm"


def reference_path() -> Path:
    """The reference component, chosen by a fixed rule (never by file time):

    1. `$AGENT_RECOVERY_REFERENCE_WASM`, when set (a path);
    2. the component packaged with this module (`_wasm/agent_recovery_policy.wasm`,
       what `pip install` put there);
    3. in a source checkout without a packaged copy, cargo's build of it
       (`${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/`, where `setup.py`
       and the Node build put it).

    A stale packaged copy is not replaced by a newer cargo build: reinstall
    (`pip install ./python`) or point the variable at the build.
    """
    given = os.environ.get("AGENT_RECOVERY_REFERENCE_WASM")
    if given:
        return Path(given)
    packaged = Path(__file__).with_name("_wasm") / _WASM_NAME
    if packaged.is_file():
        return packaged
    repo = Path(__file__).resolve().parents[3]  # python/src/agent_recovery/ -> repo
    if (repo / "Cargo.toml").is_file() and (repo / "guest").is_dir():
        target = Path(os.environ.get("CARGO_TARGET_DIR", repo / "target"))
        built = target / "wasm32-wasip2" / "release" / _WASM_NAME
        if built.is_file():
            return built
    raise PolicyRuntimeError(
        "io",
        f"the reference component is not packaged ({packaged} is missing); install "
        "with `pip install ./python` from a checkout (which builds it with cargo), or "
        "set AGENT_RECOVERY_REFERENCE_WASM to its path",
    )


def read_source(source: Source) -> bytes:
    """The bytes of a component given as a path, bytes, or None (reference)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    path = reference_path() if source is None else Path(source)
    try:
        return path.read_bytes()
    except OSError as e:
        raise PolicyRuntimeError(
            "io", f"cannot read the component {str(path)!r} ({e.strerror}); check the path"
        ) from None


def parse_pin(sha256: str) -> str:
    """A sha256 pin as lowercase hex: 64 hex digits, any case, with or without
    a `sha256:` prefix (the same rule as the Rust and Node hosts); anything else
    is `invalid_argument` (code `invalid-argument`), not a mismatch."""
    digits = sha256[len("sha256:"):] if sha256.startswith("sha256:") else sha256
    if len(digits) != 64 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise PolicyRuntimeError(
            "invalid_argument",
            f"invalid sha256 {sha256[:80]!r}: expected 64 hex digits; compute it with "
            "`sha256sum policy.wasm`",
        )
    return digits.lower()


def check_digest(sha256: Optional[str], digest: str) -> None:
    """Refuse bytes whose digest is not the pinned one (`sha256_mismatch`,
    code `digest-mismatch`), or a pin that is not a digest (`invalid_argument`)."""
    if sha256 is None:
        return
    pinned = parse_pin(sha256)
    if pinned != digest:
        raise PolicyRuntimeError(
            "sha256_mismatch",
            f"the component's sha256 is {digest}, not the pinned {pinned}; "
            "refusing it, check that this is the file you reviewed",
        )


class Policy:
    """A loaded policy component. Create it with `Policy.load`."""

    def __init__(self, compiled: Compiled, limits: Limits, origin: str) -> None:
        """Use `Policy.load`; this instantiates an already compiled component."""
        self._compiled = compiled
        self._limits = limits
        self._lock = threading.Lock()
        self._sandbox: Optional[Sandbox] = Sandbox(compiled, limits)
        self.origin = origin
        info = self.info()
        if not info["contract"].startswith(CONTRACT_PREFIX):
            raise PolicyRuntimeError(
                "incompatible",
                f"policy {info['name']!r} implements contract {info['contract']!r}, this "
                f"host speaks {CONTRACT_PREFIX}x; build it against agent:recovery@0.1.0",
            )
        self._info = info
        self._ref: PolicyRef = {
            "name": info["name"],
            "version": info["version"],
            "sha256": compiled.sha256,
        }

    @classmethod
    def load(
        cls,
        path: Source = None,
        *,
        sha256: Optional[str] = None,
        limits: Optional[Limits] = None,
        require_signature: "Optional[Sequence[TrustedKey]]" = None,
        signature: "Union[str, bytes, None]" = None,
    ) -> "Policy":
        """Load a component: None (the packaged reference), a path, or its bytes.

        With `sha256` (hex) the bytes must have that digest. With
        `require_signature` (trusted Ed25519 public keys: PEM text or key
        objects) they must carry a valid signature by one of them: a path's is
        read from `PATH.sig`, bytes need `signature` (the `.sig` text); the
        packaged reference needs none (docs/signing.md). Compiling takes a
        few seconds the first time a digest is seen in the process.
        Raises `PolicyRuntimeError` (`io`, `load`, `incompatible`, `instantiate`,
        `sha256_mismatch`, ...), `SignatureError` (code `signature`).
        """
        wasm = read_source(path)
        digest = hashlib.sha256(wasm).hexdigest()
        # Before compiling: refused bytes are never parsed.
        check_digest(sha256, digest)
        if require_signature is not None and path is not None:
            from .signing import read_signature, verify

            if signature is None and not isinstance(path, (bytes, bytearray, memoryview)):
                signature = read_signature(path)
            label = "the candidate" if isinstance(path, (bytes, bytearray, memoryview)) else str(path)
            verify(wasm, signature, require_signature, label)
        compiled = compile_component(wasm, digest)
        if path is None:
            origin = "reference"
        elif isinstance(path, (bytes, bytearray, memoryview)):
            origin = f"<{len(wasm)} bytes>"
        else:
            origin = str(path)
        return cls(compiled, limits or Limits(), origin)

    # -- identity ---------------------------------------------------------------

    @property
    def sha256(self) -> str:
        """Hex sha256 of the component's bytes."""
        return self._compiled.sha256

    @property
    def name(self) -> str:
        """The policy's name (`meta.info`)."""
        return self._info["name"]

    @property
    def version(self) -> str:
        """The policy's version (`meta.info`)."""
        return self._info["version"]

    @property
    def limits(self) -> Limits:
        """The limits every call runs under."""
        return self._limits

    def describe(self) -> Dict[str, Any]:
        """Name, version, contract, sha256, size and origin of this component."""
        return {
            "name": self._info["name"],
            "version": self._info["version"],
            "contract": self._info["contract"],
            "sha256": self._compiled.sha256,
            "size": self._compiled.size,
            "origin": self.origin,
        }

    def __repr__(self) -> str:
        return f"<Policy {self.name} {self.version} sha256={self.sha256[:12]}>"

    # -- plumbing ---------------------------------------------------------------

    def _call_text(self, name: str, args: Sequence[_abi.Arg]) -> str:
        size = 0
        for _, data in args:
            size += len(data)
        if size > self._limits.max_input_bytes:
            try:
                check_size(size, self._limits.max_input_bytes)
            except PolicyError as e:
                raise PolicyError(e.kind, e.message, code="input-too-large") from None
        with self._lock:
            sandbox = self._sandbox or self._live_sandbox()
            try:
                return sandbox.call_text(name, args, size)
            except PolicyRuntimeError:
                if sandbox.poisoned:
                    self._sandbox = None
                raise

    def _call_typed(self, name: str, *args: Any) -> Any:
        with self._lock:
            sandbox = self._live_sandbox()
            try:
                return sandbox.call_typed(name, *args)
            except PolicyRuntimeError:
                if sandbox.poisoned:
                    self._sandbox = None
                raise

    def _parse(self, text: str, export: str) -> Any:
        """`json.loads` of a JSON entry point's output; garbage is `invalid_output`."""
        try:
            return json.loads(text)
        except ValueError as e:
            raise PolicyRuntimeError(
                "invalid_output",
                f"`{export}` of policy {self.name!r} returned text that is not JSON ({e}): "
                f"{text[:80]!r}; the component breaks the contract, report it to its authors",
            ) from None

    def _live_sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = Sandbox(self._compiled, self._limits)
        return self._sandbox

    # -- JSON entry points (the component's bytes, unchanged) --------------------

    def classify_json(self, observation: Union[str, bytes]) -> str:
        """`classify-json`: the envelope as the component printed it."""
        obs = utf8(text_only(observation, "classify_json", "observation"), "observation")
        return self._call_text("classify-json", ((_abi.KIND_STRING, obs),))

    def decide_json(self, observation: Union[str, bytes], context: Union[str, bytes] = "{}") -> str:
        """`decide-json`: the decision as the component printed it."""
        obs = utf8(text_only(observation, "decide_json", "observation"), "observation")
        ctx = utf8(text_only(context, "decide_json", "context"), "context")
        return self._call_text("decide-json", ((_abi.KIND_STRING, obs), (_abi.KIND_STRING, ctx)))

    def render_json(
        self, envelope: Any, format: str, options: Any = None
    ) -> str:
        """`render-json`: the envelope rendered for a boundary, as the component printed it."""
        fmt = str(format).replace("_", "-")
        if fmt not in RENDER_FORMATS:
            raise PolicyError(
                "invalid_argument",
                f"format {format!r} is not one of {', '.join(RENDER_FORMATS)}; use one of those "
                "(ag-ui-run-error is rendered by Runtime.render)",
            )
        env = json_text(envelope, "envelope")
        opts = json_text(options, "options", empty=b"")
        return self._call_text(
            "render-json",
            ((_abi.KIND_STRING, env), (_abi.KIND_ENUM, fmt.encode()), (_abi.KIND_STRING, opts)),
        )

    def registry_json(self) -> str:
        """`codes-json`: every code as the component printed it."""
        return self._call_text("codes-json", ())

    def smoke_tests_json(self) -> str:
        """`smoke-tests`: the component's own smoke set, as JSON text."""
        return self._call_text("smoke-tests", ())

    # -- dict API -----------------------------------------------------------------

    def classify(self, obs: Any) -> Envelope:
        """Normalize an observation (dict or JSON text) into an envelope."""
        text = self._call_text(
            "classify-json", ((_abi.KIND_STRING, json_text(obs, "observation")),)
        )
        return cast(Envelope, self._parse(text, "classify-json"))

    def decide(self, obs: Any, ctx: Any = None) -> Decision:
        """Decide the next step; `ctx` is a `Context` dict, JSON text or None.

        The result is the component's decision plus `policy`: the name,
        version and sha256 of the component that decided.
        """
        args = (
            (_abi.KIND_STRING, json_text(obs, "observation")),
            (_abi.KIND_STRING, json_text(ctx, "context", empty=b"{}")),
        )
        decision = self._parse(self._call_text("decide-json", args), "decide-json")
        if not isinstance(decision, dict) or not isinstance(decision.get("action"), str):
            raise PolicyRuntimeError(
                "invalid_output",
                f"`decide-json` of policy {self.name!r} returned JSON without an `action`; "
                "the component breaks the contract, report it to its authors",
            )
        decision["policy"] = cast(PolicyRef, dict(self._ref))
        return cast(Decision, decision)

    def key(self, run_id: str, step_id: str, tool: str, args: Any) -> str:
        """The idempotency key of one logical action (hex sha256).

        `args` is a dict (or JSON text); key order does not matter.
        """
        return self._call_text(
            "key",
            (
                (_abi.KIND_STRING, utf8(run_id, "run_id")),
                (_abi.KIND_STRING, utf8(step_id, "step_id")),
                (_abi.KIND_STRING, utf8(tool, "tool")),
                (_abi.KIND_STRING, json_text(args, "args")),
            ),
        )

    def backoff(
        self,
        call: str,
        attempt: int,
        seed: Optional[int] = None,
        config: Optional[PolicyConfig] = None,
    ) -> int:
        """The full-jitter delay (ms) before the retry that follows failed `attempt`."""
        if call not in _CALLS:
            raise PolicyError(
                "invalid_argument", f"call {call!r} is not one of tool, llm, agent; use one of those"
            )
        n = integer(attempt, "attempt", U32)
        s = None if seed is None else integer(seed, "seed", U64)
        cfg = _config_record(config)
        return int(self._call_typed("delay", call, n, s, cfg))

    def registry(self) -> List[CodeInfo]:
        """Every code the policy can emit, sorted by code."""
        return cast(List[CodeInfo], self._parse(self.registry_json(), "codes-json"))

    def errors_block(self, codes: Sequence[str] = ()) -> str:
        """The MCP `## Errors` block for a tool description (`errors-block`): a
        heading and a fenced JSON array of `{code, retryable, severity, category,
        hint}`. `codes` lists codes or code prefixes (`"tool.http."`); empty
        means every code."""
        if isinstance(codes, str) or not all(isinstance(c, str) for c in codes):
            raise PolicyError(
                "invalid_argument",
                f"codes is a list of codes or code prefixes, got {codes!r}; pass e.g. ['tool.']",
            )
        return str(self._call_typed("errors-block", list(codes)))

    def lookup(self, code: str) -> Optional[CodeInfo]:
        """One registry row by its full code, or None (as Node's `lookup`)."""
        for row in self.registry():
            if row["code"] == code:
                return row
        return None

    def render(self, envelope: Any, format: str, options: Any = None) -> Any:
        """Render an envelope (dict or JSON text) for a boundary.

        Returns the parsed JSON for every format but `coordinator-text`, which
        is a line of text and comes back as `str`.
        """
        text = self.render_json(envelope, format, options)
        if str(format).replace("_", "-") == "coordinator-text":
            return text
        return self._parse(text, "render-json")

    def info(self) -> PolicyInfo:
        """Name, version, contract and description of the policy."""
        rec = self._call_typed("info")
        return {
            "name": rec.name,
            "version": rec.version,
            "contract": rec.contract,
            "description": rec.description,
        }

    def smoke_tests(self) -> List[Dict[str, Any]]:
        """The component's smoke set: `[{"observation", "context", "expect"}]`."""
        return cast(List[Dict[str, Any]], self._parse(self.smoke_tests_json(), "smoke-tests"))


def _config_record(config: Optional[PolicyConfig]) -> Any:
    """A `policy-config` record for the typed `delay` export."""
    if config is None:
        return None
    if not isinstance(config, dict):
        raise PolicyError("invalid_config", f"config must be a dict, got {type(config).__name__}")
    unknown = set(config) - {"tool", "llm", "agent", "retry_budget_ms"}
    if unknown:
        raise PolicyError(
            "invalid_config",
            f"config has unknown field(s) {', '.join(sorted(unknown))}; "
            "use tool, llm, agent, retry_budget_ms",
        )
    fields: Dict[str, Any] = {}
    for call in _CALLS:
        b = config.get(call)
        if b is None:
            fields[call] = None
            continue
        if not isinstance(b, dict) or set(b) != {"base_ms", "cap_ms", "max_attempts"}:
            raise PolicyError(
                "invalid_config",
                f"config.{call} must set exactly base_ms, cap_ms and max_attempts, got "
                f"{sorted(b) if isinstance(b, dict) else type(b).__name__}; the typed "
                "backoff call takes complete records (decide accepts partial ones)",
            )
        fields[call] = record(
            {
                "base_ms": integer(b["base_ms"], f"config.{call}.base_ms", U64, "invalid_config"),
                "cap_ms": integer(b["cap_ms"], f"config.{call}.cap_ms", U64, "invalid_config"),
                "max_attempts": integer(
                    b["max_attempts"], f"config.{call}.max_attempts", U32, "invalid_config"
                ),
            }
        )
    budget = config.get("retry_budget_ms")
    fields["retry_budget_ms"] = (
        None if budget is None else integer(budget, "config.retry_budget_ms", U64, "invalid_config")
    )
    return record(fields)
