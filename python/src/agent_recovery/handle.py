"""`PolicyHandle`: the active policy, swappable at run time.

A swap loads the candidate *beside* the active policy, validates it and only
then switches, so a bad file never answers a single call:

1. read the bytes and check the optional sha256 pin;
2. compile and instantiate it (every export is type-checked against the contract);
3. read `info()` (the contract must be 0.1.x);
4. run its own smoke set through `decide_json`.

Any failure raises `SwapError` saying why, and the old policy stays active.
The switch is one reference assignment: a call already running finishes on the
policy it started with; every later call sees the new one.

Each swap and refusal is also reported through OpenTelemetry (the `telemetry`
option, default the global providers): a span event on the caller's current
span and the `agent_recovery.policy.swaps` counter (docs/telemetry.md,
"Policy swaps").
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

from .errors import PolicyError, PolicyRuntimeError, SwapError
from .limits import Limits
from .policy import Policy, Source
from .types import CodeInfo, Decision, Envelope, PolicyConfig, PolicyInfo
from .verify import run_smoke_tests

if TYPE_CHECKING:
    from .signing import TrustedKey
    from .telemetry import Telemetry


def load_verified(
    source: Source,
    sha256: Optional[str],
    limits: Optional[Limits],
    require_signature: "Optional[Sequence[TrustedKey]]" = None,
    signature: "Union[str, bytes, None]" = None,
) -> Policy:
    """Load a policy and run its smoke set; raise `SwapError` if anything fails."""
    try:
        policy = Policy.load(
            source, sha256=sha256, limits=limits, require_signature=require_signature, signature=signature
        )
        run_smoke_tests(policy)
    except PolicyRuntimeError as e:
        error = SwapError(e.kind, f"candidate refused: {e.message}")
        error.problem = getattr(e, "problem", None)
        raise error from None
    except PolicyError as e:
        raise SwapError("smoke_test", f"candidate refused: {e}") from None
    return policy


class PolicyHandle:
    """Holds the active `Policy`; `swap` replaces it after validation.

    The call methods delegate to the active policy.
    """

    def __init__(self, policy: Optional[Policy] = None, *, telemetry: "Optional[Telemetry]" = None) -> None:
        """Wrap `policy`, or load and verify the packaged reference.

        `telemetry`: where swaps and refusals are reported (`Telemetry.global_()`
        when None, `Telemetry(meter_provider=...)`, `Telemetry.off()`)."""
        from .telemetry import swap_telemetry

        self._telemetry = swap_telemetry(telemetry)
        self._active = policy if policy is not None else load_verified(None, None, None)
        self._swap_lock = threading.Lock()
        self._activated_at = time.time()
        self._swaps = 0

    @classmethod
    def load(
        cls,
        path: Source = None,
        *,
        sha256: Optional[str] = None,
        limits: Optional[Limits] = None,
        telemetry: "Optional[Telemetry]" = None,
        require_signature: "Optional[Sequence[TrustedKey]]" = None,
        signature: "Union[str, bytes, None]" = None,
    ) -> "PolicyHandle":
        """A handle on a verified component (None: the packaged reference).

        `require_signature`: trusted Ed25519 public keys; the component must be
        signed by one of them (`PATH.sig`, or `signature` for bytes), else
        `SwapError` with code `signature` (docs/signing.md)."""
        from .telemetry import swap_telemetry

        swap_telemetry(telemetry)  # a bad option fails before the load
        return cls(load_verified(path, sha256, limits, require_signature, signature), telemetry=telemetry)

    @property
    def policy(self) -> Policy:
        """The active policy."""
        return self._active

    def swap(
        self,
        path: Source,
        sha256: Optional[str] = None,
        *,
        limits: Optional[Limits] = None,
        require_signature: "Optional[Sequence[TrustedKey]]" = None,
        signature: "Union[str, bytes, None]" = None,
    ) -> Dict[str, Any]:
        """Validate the component at `path` (or these bytes) and make it active.

        Returns `describe()` of the new policy. Raises `SwapError` (the old
        policy stays active) when the candidate cannot be read or compiled,
        does not implement the contract, fails its smoke tests, its digest
        differs from `sha256`, or, with `require_signature` (trusted keys), it
        is not signed by one of them (`PATH.sig`, or `signature` for bytes;
        code `signature`, `problem` says why).
        """
        with self._swap_lock:
            previous = self._active
            try:
                candidate = load_verified(
                    path, sha256, limits or previous.limits, require_signature, signature
                )
            except SwapError as e:
                if self._telemetry is not None:
                    self._telemetry.refused(previous, e)
                raise
            self._active = candidate
            self._activated_at = time.time()
            self._swaps += 1
            if self._telemetry is not None:
                self._telemetry.swapped(previous, candidate)
            return self.describe()

    def describe(self) -> Dict[str, Any]:
        """The active policy: name, version, contract, sha256, size, origin, swaps."""
        out = self._active.describe()
        out["activated_at"] = self._activated_at
        out["swaps"] = self._swaps
        return out

    # -- delegation -------------------------------------------------------------

    def classify_json(self, observation: Any) -> str:
        """See `Policy.classify_json`."""
        return self._active.classify_json(observation)

    def decide_json(self, observation: Any, context: Any = "{}") -> str:
        """See `Policy.decide_json`."""
        return self._active.decide_json(observation, context)

    def classify(self, obs: Any) -> Envelope:
        """See `Policy.classify`."""
        return self._active.classify(obs)

    def decide(self, obs: Any, ctx: Any = None) -> Decision:
        """See `Policy.decide` (the result's `policy` names the component that decided)."""
        return self._active.decide(obs, ctx)

    def backoff(
        self,
        call: str,
        attempt: int,
        seed: Optional[int] = None,
        config: Optional[PolicyConfig] = None,
    ) -> int:
        """See `Policy.backoff`."""
        return self._active.backoff(call, attempt, seed, config)

    def key(self, run_id: str, step_id: str, tool: str, args: Any) -> str:
        """See `Policy.key`."""
        return self._active.key(run_id, step_id, tool, args)

    def registry(self) -> List[CodeInfo]:
        """See `Policy.registry`."""
        return self._active.registry()

    def lookup(self, code: str) -> Optional[CodeInfo]:
        """See `Policy.lookup`."""
        return self._active.lookup(code)

    def registry_json(self) -> str:
        """See `Policy.registry_json`."""
        return self._active.registry_json()

    def errors_block(self, codes: Sequence[str] = ()) -> str:
        """See `Policy.errors_block`."""
        return self._active.errors_block(codes)

    def render(self, envelope: Any, format: str, options: Any = None) -> Any:
        """See `Policy.render`."""
        return self._active.render(envelope, format, options)

    def render_json(self, envelope: Any, format: str, options: Any = None) -> str:
        """See `Policy.render_json`."""
        return self._active.render_json(envelope, format, options)

    def info(self) -> PolicyInfo:
        """See `Policy.info`."""
        return self._active.info()
