"""An independent implementation of the documented full-jitter formula.

Used to compute the expected seeded delays in tests/vectors/decisions.json, so
that those vectors check the Rust policy against the specification in docs/envelope-and-decision.md
rather than against itself:

    ceiling = min(cap_ms, base_ms * 2**(attempt-1))
    delay   = splitmix64(seed ^ splitmix64(attempt)) % (ceiling + 1)
"""

M64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def delay(seed: int, attempt: int, base_ms: int, cap_ms: int) -> int:
    ceiling = min(cap_ms, base_ms * 2 ** (attempt - 1))
    return splitmix64(seed ^ splitmix64(attempt)) % (ceiling + 1)


if __name__ == "__main__":
    import sys

    seed, attempt, base, cap = (int(a) for a in sys.argv[1:5])
    print(delay(seed, attempt, base, cap))
