//! What a policy component gets to see: the store data of one instance.
//!
//! A component may import only `wasi:cli`, `wasi:io`, `wasi:clocks` and
//! `wasi:random` (`policy.rs` refuses any other import at load, so
//! `wasi:filesystem` and `wasi:sockets` never reach a call), and the context
//! behind those is empty:
//!
//! - no environment variables and no arguments;
//! - stdin is closed and stdout/stderr discard everything;
//! - clocks and random are the host's (the policy uses them only when the
//!   caller gave no `now_ms` / `seed`).
//!
//! As a second line of defence the context also has no filesystem preopens and
//! denies TCP, UDP, name lookup and every socket address.
//!
//! Memory growth goes through [`Limiter`], which remembers when it refused,
//! so a trap caused by the refusal is reported as a memory limit.

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::Limits;

/// The data of one store: the empty WASI context and the limiter.
pub(crate) struct Sandbox {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
}

impl Sandbox {
    pub(crate) fn new(limits: &Limits) -> Self {
        let wasi = WasiCtxBuilder::new()
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        Sandbox {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter::new(limits.memory_bytes()),
        }
    }
}

impl WasiView for Sandbox {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// [`StoreLimits`] that records whether it refused to grow a memory or table.
pub(crate) struct Limiter {
    inner: StoreLimits,
    refused: bool,
}

impl Limiter {
    fn new(memory_bytes: usize) -> Self {
        Limiter {
            inner: StoreLimitsBuilder::new()
                .memory_size(memory_bytes)
                .instances(64)
                .memories(8)
                .tables(64)
                .table_elements(100_000)
                .build(),
            refused: false,
        }
    }

    /// Whether a growth was refused since the last [`reset`](Self::reset).
    pub(crate) fn refused(&self) -> bool {
        self.refused
    }

    pub(crate) fn reset(&mut self) {
        self.refused = false;
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.inner.memory_growing(current, desired, maximum)?;
        self.refused |= !allowed;
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.inner.table_growing(current, desired, maximum)?;
        self.refused |= !allowed;
        Ok(allowed)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}
