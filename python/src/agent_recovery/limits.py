"""Per-call resource limits, the same as the Rust host's.

# Why fuel plus a per-byte allowance?

A policy is pure computation over its input, so its honest cost grows with the
input: parsing a 10 MB response body takes far more instructions than a
200-byte one. A flat budget either stops large honest inputs or lets a runaway
loop spin for seconds. A base plus a per-byte allowance does neither: small
calls get `fuel_base`, and every input byte earns `fuel_per_byte` more. Fuel
counts WebAssembly instructions (roughly one unit each).

# Default

| field             | default     |
|-------------------|-------------|
| `memory_bytes`    | 128 MiB     |
| `fuel_base`       | 100,000,000 |
| `fuel_per_byte`   | 1,000       |
| `max_input_bytes` | 16 MiB      |
"""

from __future__ import annotations

from dataclasses import dataclass

#: The longest name the recovery loop takes, in UTF-8 bytes: a run id, a step
#: or fan-out id, a tool, a target or fallback. The loop component's own limit
#: (docs/runtime.md, "Limits"); the runtime refuses a longer name before the
#: component sees it, and a test checks that the component agrees.
MAX_ID_BYTES = 512


@dataclass(frozen=True)
class Limits:
    """Limits applied to every call into a policy component.

    >>> Limits().fuel_for(1_000)
    101000000
    """

    #: The most linear memory one component instance may hold, in bytes.
    memory_bytes: int = 128 << 20
    #: Fuel every call gets, whatever its input size (also used to instantiate).
    fuel_base: int = 100_000_000
    #: Extra fuel per byte of input.
    fuel_per_byte: int = 1_000
    #: The largest input (all text arguments of one call together) passed to
    #: the component; larger inputs fail with `PolicyError("too_large")`.
    max_input_bytes: int = 16 << 20

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "fuel_base", "fuel_per_byte", "max_input_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(
                    f"Limits.{name} must be a non-negative integer, got {value!r}; "
                    f"omit it to take the default"
                )

    def fuel_for(self, input_bytes: int) -> int:
        """The fuel a call with `input_bytes` of input gets."""
        return min(self.fuel_base + self.fuel_per_byte * input_bytes, (1 << 64) - 1)
