"""The errors of the Python host, as data with a stable kind.

Three families, because a caller handles each one differently:

- [`PolicyError`][]: the component rejected the *input* (bad JSON, an attempt of
  0, an unknown render format...). Fix the input; retrying it unchanged gives
  the same error.
- [`PolicyRuntimeError`][]: the *component* failed (it could not be loaded, it
  does not implement the contract, it trapped, it ran out of fuel). A trapped
  instance is discarded and the next call runs on a fresh one.
- [`SwapError`][] (a `PolicyRuntimeError`): a hot swap was refused; the old
  policy is still active.

Every message names the bad value and ends with a hint.

Every error also has a `code` in the spelling the Rust, Node and Python hosts
share (docs/hosts.md): `io`, `invalid-argument`, `digest-mismatch`, `load`,
`incompatible`, `smoke-test`, `trap`, `out-of-fuel`, `memory-limit`,
`invalid-output`, `input-too-large`, `signature`, or `policy/<kind>` for a `PolicyError`
(e.g. `policy/invalid-json`). Match on `code`; the snake_case `kind` of a
`PolicyRuntimeError` is the older, Python-only spelling (DEPRECATED for
matching, kept working: `sha256_mismatch` is `digest-mismatch`).
"""

from __future__ import annotations

from typing import Final, Optional

#: The kinds of `PolicyError`, snake_case twins of the WIT `error-kind` cases.
POLICY_ERROR_KINDS: Final = (
    "invalid_json",
    "invalid_observation",
    "invalid_context",
    "invalid_config",
    "invalid_argument",
    "too_large",
    "internal",
)

#: The kinds of `PolicyRuntimeError`. New kinds may be added.
RUNTIME_ERROR_KINDS: Final = (
    "io",  # the component file could not be read
    "load",  # the bytes are not a component wasmtime can compile
    "incompatible",  # missing or mistyped export, unknown import, other contract
    "instantiate",  # instantiation failed (e.g. its memory exceeds Limits.memory_bytes)
    "trap",  # the component trapped (a guest panic is a trap)
    "out_of_fuel",  # the call used up its fuel (CPU budget), see Limits
    "invalid_output",  # the component returned something unusable
    "sha256_mismatch",  # a pinned digest did not match (swap and load)
    "smoke_test",  # the component failed its own smoke tests (swap)
    "invalid_argument",  # an argument given to the host is invalid (a malformed sha256 pin)
    "signature",  # a required signature is missing, malformed, untrusted or bad (agent_recovery.signing)
)

#: The shared host error codes (docs/hosts.md), one spelling in Rust, Node and Python.
ERROR_CODES: Final = (
    "io",
    "invalid-argument",
    "digest-mismatch",
    "load",
    "incompatible",
    "smoke-test",
    "trap",
    "out-of-fuel",
    "memory-limit",
    "invalid-output",
    "input-too-large",
    "signature",
)

#: `PolicyRuntimeError.kind` -> its shared code.
_RUNTIME_CODES: Final = {
    "io": "io",
    "load": "load",
    "incompatible": "incompatible",
    "instantiate": "load",
    "trap": "trap",
    "out_of_fuel": "out-of-fuel",
    "memory_limit": "memory-limit",
    "invalid_output": "invalid-output",
    "sha256_mismatch": "digest-mismatch",
    "smoke_test": "smoke-test",
    "invalid_argument": "invalid-argument",
    "signature": "signature",
}


class PolicyError(Exception):
    """The policy rejected its input (the WIT `policy-error`).

    `kind` is one of `POLICY_ERROR_KINDS` (`invalid_json`, `invalid_observation`,
    `invalid_context`, `invalid_config`, `invalid_argument`, `too_large`,
    `internal`); `message` is the component's message, unchanged.

    Two checks happen in the host before the component sees the input, with the
    same kinds: text that is not UTF-8 (`invalid_json`; JSON text must be UTF-8)
    and input over `Limits.max_input_bytes` (`too_large`, code `input-too-large`).

    `code` is `policy/<kind>` in the shared spelling (`policy/invalid-json`),
    or `input-too-large` when this host refused the input itself.
    """

    kind: str
    message: str
    code: str

    def __init__(self, kind: str, message: str, *, code: Optional[str] = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.code = code or "policy/" + kind.replace("_", "-")


class PolicyRuntimeError(Exception):
    """The component itself failed: load, contract, trap, fuel, output.

    `kind` is one of `RUNTIME_ERROR_KINDS`. After a `trap` or `out_of_fuel` the
    instance is dropped; the next call instantiates the component again.
    `code` is the shared spelling of the kind (`out_of_fuel` -> `out-of-fuel`,
    `sha256_mismatch` -> `digest-mismatch`); match on it.
    """

    kind: str
    message: str
    code: str

    def __init__(self, kind: str, message: str, *, code: Optional[str] = None) -> None:
        message = "; ".join(line.strip() for line in message.splitlines() if line.strip())
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.code = code or _RUNTIME_CODES.get(kind, kind.replace("_", "-"))


class SwapError(PolicyRuntimeError):
    """A hot swap was refused; the previously active policy is still active.

    `kind` says why (`io`, `load`, `incompatible`, `sha256_mismatch`,
    `smoke_test`, `trap`, `signature`, ...); `message` gives the details.
    For `signature`, `problem` says why (`missing`, `malformed`,
    `unsupported-alg`, `unknown-key`, `bad-signature`); otherwise it is None.
    """

    problem: Optional[str] = None
