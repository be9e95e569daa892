//! Per-call resource limits.
//!
//! # Why fuel plus a per-byte allowance?
//!
//! A policy is pure computation over its input, so its honest cost grows with
//! the input: parsing a 10 MB response body takes far more instructions than a
//! 200-byte one. A flat budget either stops large honest inputs or lets a
//! runaway loop spin for seconds. A base plus a per-byte allowance does
//! neither: small calls get [`fuel_base`](Limits::fuel_base), and every input
//! byte earns [`fuel_per_byte`](Limits::fuel_per_byte) more.
//!
//! Fuel counts WebAssembly instructions (roughly one unit each); the
//! reference policy burns about 5 billion units a second on one core, so the
//! base of 100 million stops a runaway on a small input in about 20 ms.
//!
//! Measured cost of the reference policy (`decide-json`), per input byte:
//! a plain text body 6-8, a provider error body of nested objects about 190,
//! bodies of many small keys or headers 600-660, an array of tiny numbers
//! (`[0,0,0,...]`) about 1,700. The default of 1,000 per byte lets every
//! realistic body up to the input limit through; a pathological one fails
//! with [`ErrorKind::OutOfFuel`](crate::ErrorKind::OutOfFuel) (or with
//! [`ErrorKind::MemoryLimit`](crate::ErrorKind::MemoryLimit) first).

/// Limits applied to every call into a policy component.
///
/// # Default
///
/// | limit | default |
/// | --- | --- |
/// | [`memory_bytes`](Self::memory_bytes) | 128 MiB |
/// | [`fuel_base`](Self::fuel_base) | 100,000,000 |
/// | [`fuel_per_byte`](Self::fuel_per_byte) | 1,000 |
/// | [`max_input_bytes`](Self::max_input_bytes) | 16 MiB |
///
/// ```
/// let limits = agent_recovery::Limits::default().with_memory_bytes(64 << 20);
/// assert_eq!(limits.memory_bytes(), 64 << 20);
/// assert_eq!(limits.fuel_for(1_000), 101_000_000);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    memory_bytes: usize,
    fuel_base: u64,
    fuel_per_byte: u64,
    max_input_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 128 << 20,
            fuel_base: 100_000_000,
            fuel_per_byte: 1_000,
            max_input_bytes: 16 << 20,
        }
    }
}

impl Limits {
    /// The most linear memory one component instance may hold, in bytes.
    /// Growing past it fails the call with [`ErrorKind::MemoryLimit`](crate::ErrorKind::MemoryLimit).
    pub fn memory_bytes(&self) -> usize {
        self.memory_bytes
    }

    /// Sets [`memory_bytes`](Self::memory_bytes).
    pub fn with_memory_bytes(mut self, bytes: usize) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// Fuel every call gets whatever its input size (also the fuel to instantiate).
    pub fn fuel_base(&self) -> u64 {
        self.fuel_base
    }

    /// Sets [`fuel_base`](Self::fuel_base).
    pub fn with_fuel_base(mut self, fuel: u64) -> Self {
        self.fuel_base = fuel;
        self
    }

    /// Extra fuel per byte of input. Running out fails the call with
    /// [`ErrorKind::OutOfFuel`](crate::ErrorKind::OutOfFuel).
    pub fn fuel_per_byte(&self) -> u64 {
        self.fuel_per_byte
    }

    /// Sets [`fuel_per_byte`](Self::fuel_per_byte).
    pub fn with_fuel_per_byte(mut self, fuel: u64) -> Self {
        self.fuel_per_byte = fuel;
        self
    }

    /// The largest input (all string arguments of one call together) the host
    /// passes to the component; a larger one fails with
    /// [`ErrorKind::InputTooLarge`](crate::ErrorKind::InputTooLarge) before any call.
    pub fn max_input_bytes(&self) -> usize {
        self.max_input_bytes
    }

    /// Sets [`max_input_bytes`](Self::max_input_bytes).
    pub fn with_max_input_bytes(mut self, bytes: usize) -> Self {
        self.max_input_bytes = bytes;
        self
    }

    /// The fuel a call with `input_bytes` of input gets: `fuel_base + fuel_per_byte * input_bytes`.
    pub fn fuel_for(&self, input_bytes: usize) -> u64 {
        let bytes = u64::try_from(input_bytes).unwrap_or(u64::MAX);
        self.fuel_base
            .saturating_add(self.fuel_per_byte.saturating_mul(bytes))
    }
}
