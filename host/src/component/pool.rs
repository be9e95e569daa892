//! The pool of idle instances, and how one call runs.
//!
//! A call pops an idle `(Store, instance)` pair or instantiates a new one,
//! refuels it, runs, and pushes it back. The mutex is held only for the pop
//! and the push, so calls on different threads run in parallel. An instance
//! whose call failed at the WebAssembly level (trap, fuel, memory, unreadable
//! result) is dropped, never reused: its state is unknown. A `policy-error`
//! is an ordinary return value and keeps the instance.

use std::sync::{Mutex, PoisonError};

use wasmtime::{Store, Trap};

use crate::Policy;
use crate::component::gen_::RecoveryPolicy;
use crate::component::sandbox::Sandbox;
use crate::error::{Error, ErrorKind, Result};

/// One instance with the store that owns it.
pub(crate) struct Instance {
    store: Store<Sandbox>,
    bindings: RecoveryPolicy,
}

/// Idle instances, at most `max_idle` of them.
pub(crate) struct Pool {
    idle: Mutex<Vec<Instance>>,
    max_idle: usize,
}

impl Pool {
    pub(crate) fn new(max_idle: usize) -> Self {
        Pool {
            idle: Mutex::new(Vec::with_capacity(max_idle)),
            max_idle,
        }
    }

    fn pop(&self) -> Option<Instance> {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    fn push(&self, instance: Instance) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < self.max_idle {
            idle.push(instance);
        }
    }

    /// How many idle instances the pool holds now.
    pub(crate) fn idle(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Policy {
    /// Runs `f` on a pooled instance with fuel for `input_bytes` of input.
    ///
    /// `what` names the export for error messages (`classify-json`).
    pub(crate) fn call<R>(
        &self,
        what: &str,
        input_bytes: usize,
        f: impl FnOnce(&mut Store<Sandbox>, &RecoveryPolicy) -> wasmtime::Result<R>,
    ) -> Result<R> {
        let max = self.limits.max_input_bytes();
        if input_bytes > max {
            return Err(Error::new(
                ErrorKind::InputTooLarge,
                format!(
                    "input to `{what}` is {input_bytes} bytes, over the limit of {max} bytes; send a smaller input or raise Limits::max_input_bytes"
                ),
            ));
        }
        let mut instance = match self.pool.pop() {
            Some(instance) => instance,
            None => self.instantiate()?,
        };
        let fuel = self.limits.fuel_for(input_bytes);
        let store = &mut instance.store;
        store.data_mut().limiter.reset();
        store
            .set_fuel(fuel)
            .map_err(|e| self.failure(what, store, e, fuel, input_bytes))?;
        match f(store, &instance.bindings) {
            Ok(value) => {
                self.pool.push(instance);
                Ok(value)
            }
            Err(e) => Err(self.failure(what, &instance.store, e, fuel, input_bytes)),
        }
    }

    /// A fresh instance in a fresh store.
    fn instantiate(&self) -> Result<Instance> {
        let mut store = Store::new(self.pre.engine(), Sandbox::new(&self.limits));
        store.limiter(|sandbox| &mut sandbox.limiter);
        let fuel = self.limits.fuel_base();
        let bindings = store
            .set_fuel(fuel)
            .and_then(|()| self.pre.instantiate(&mut store))
            .map_err(|e| self.failure("instantiation", &store, e, fuel, 0))?;
        Ok(Instance { store, bindings })
    }

    /// Turns a Wasmtime error from `what` into an [`Error`] with a kind.
    fn failure(
        &self,
        what: &str,
        store: &Store<Sandbox>,
        error: wasmtime::Error,
        fuel: u64,
        input_bytes: usize,
    ) -> Error {
        if store.data().limiter.refused() {
            let limit = self.limits.memory_bytes();
            return Error::new(
                ErrorKind::MemoryLimit,
                format!(
                    "the policy exceeded the memory limit of {limit} bytes in `{what}` (input {input_bytes} bytes); send a smaller input or raise Limits::memory_bytes"
                ),
            );
        }
        if let Some(trap) = error.downcast_ref::<Trap>() {
            if *trap == Trap::OutOfFuel {
                return Error::new(
                    ErrorKind::OutOfFuel,
                    format!(
                        "the policy ran out of fuel in `{what}` ({fuel} units for {input_bytes} input bytes); if the input is honest raise Limits::fuel_base or Limits::fuel_per_byte, else report the input to the policy's authors"
                    ),
                );
            }
            return Error::new(
                ErrorKind::Trap,
                format!(
                    "the policy trapped in `{what}`: {trap}; this is a bug in the policy component, report it with the input"
                ),
            );
        }
        if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
            return Error::new(
                ErrorKind::Trap,
                format!(
                    "the policy called exit({}) in `{what}`; a policy must return, report this to its authors",
                    exit.0
                ),
            );
        }
        Error::new(
            ErrorKind::InvalidOutput,
            format!(
                "the policy failed in `{what}`: {error:#}; the component does not follow the contract, report it to its authors"
            ),
        )
    }
}
