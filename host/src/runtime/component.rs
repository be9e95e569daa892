//! The recovery loop's component: the reference's typed `runtime@0.3.0`
//! export (`advance`), its `runtime@0.2.0` one (`check-outcome`,
//! `render-named`), `scenario@0.3.0` (`parse`) and the dead-letter rules
//! (`dead-letters@0.3.0`).
//!
//! Whatever policy decides, the loop always comes from the embedded reference
//! component (a 0.1 policy has no `runtime` export). It runs in the same
//! sandbox and under the same [`Limits`] as a policy call.

use std::sync::{Mutex, PoisonError};

use wasmtime::component::Linker;
use wasmtime::{Store, Trap};

use crate::component::gen_::runtime::dead_letters::Guest as DeadLettersGuest;
use crate::component::gen_::runtime::plan::Plan;
use crate::component::gen_::runtime::tele;
use crate::component::gen_::runtime::typed::{Effect, Input, InputKind};
use crate::component::gen_::runtime::{RuntimeHost, RuntimeHostPre};
use crate::component::sandbox::Sandbox;
use crate::error::{Error, ErrorKind, Result};
use crate::{Limits, Loader};

/// The new state (JSON text) and the effects of one `advance`.
pub(crate) struct Advanced {
    pub(crate) state: String,
    pub(crate) effects: Vec<Effect>,
}

struct Instance {
    store: Store<Sandbox>,
    bindings: RuntimeHost,
}

/// The compiled loop with a small pool of instances.
pub(crate) struct LoopComponent {
    pre: RuntimeHostPre<Sandbox>,
    idle: Mutex<Vec<Instance>>,
    limits: Limits,
}

impl LoopComponent {
    /// Instantiate-ready loop from the embedded reference.
    pub(crate) fn reference(loader: &Loader, limits: Limits) -> Result<Self> {
        let component = loader.reference_component()?;
        let engine = crate::component::policy::engine()?;
        let mut linker = Linker::<Sandbox>::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| {
            Error::new(
                ErrorKind::Load,
                format!("cannot link WASI: {e:#}; this is a host bug, please report it"),
            )
        })?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(RuntimeHostPre::new)
            .map_err(|e| {
                Error::new(
                    ErrorKind::Incompatible,
                    format!("the embedded reference does not export agent:recovery/runtime@0.3.0, @0.2.0 and scenario@0.3.0: {e:#}; rebuild the host"),
                )
            })?;
        Ok(LoopComponent {
            pre,
            idle: Mutex::new(Vec::new()),
            limits,
        })
    }

    fn call<R>(
        &self,
        what: &str,
        input_bytes: usize,
        f: impl FnOnce(&mut Store<Sandbox>, &RuntimeHost) -> wasmtime::Result<R>,
    ) -> Result<R> {
        let popped = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut instance = match popped {
            Some(i) => i,
            None => {
                let mut store = Store::new(self.pre.engine(), Sandbox::new(&self.limits));
                store.limiter(|s| &mut s.limiter);
                let bindings = store
                    .set_fuel(self.limits.fuel_base())
                    .and_then(|()| self.pre.instantiate(&mut store))
                    .map_err(|e| failure("instantiation", e, 0, None))?;
                Instance { store, bindings }
            }
        };
        let fuel = self.limits.fuel_for(input_bytes);
        instance.store.data_mut().limiter.reset();
        instance
            .store
            .set_fuel(fuel)
            .map_err(|e| failure(what, e, input_bytes, None))?;
        let out = f(&mut instance.store, &instance.bindings).map_err(|e| {
            let memory = instance.store.data().limiter.refused();
            failure(
                what,
                e,
                input_bytes,
                memory.then_some(self.limits.memory_bytes()),
            )
        })?;
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < 2 {
            idle.push(instance);
        }
        Ok(out)
    }

    /// `advance(state, input)`.
    pub(crate) fn advance(&self, state: &str, input: &Input) -> Result<Advanced> {
        let out = self.call("advance", state.len() + input_bytes(input), |store, b| {
            b.agent_recovery0_3_0_runtime()
                .call_advance(store, state, input)
        })?;
        out.map(|r| Advanced {
            state: r.state,
            effects: r.effects,
        })
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("the recovery loop refused an input: {}", e.message),
            )
        })
    }

    /// `map-lane(state, observations)`: the lane's new state and the
    /// instructions for the OpenTelemetry binding.
    pub(crate) fn map_lane(
        &self,
        state: &str,
        observations: &[tele::Observation],
    ) -> Result<(String, Vec<tele::Instruction>)> {
        let bytes = state.len() + observations.len() * 64;
        let out = self.call("map-lane", bytes, |store, b| {
            b.agent_recovery0_3_0_telemetry()
                .call_map_lane(store, state, observations)
        })?;
        out.map(|m| (m.state, m.instructions)).map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the telemetry mapping refused an observation: {}",
                    e.message
                ),
            )
        })
    }

    /// `parse(text)` of `scenario@0.3.0`: the scenario's validated plan, or
    /// the message that names what is not valid.
    pub(crate) fn parse_scenario(&self, text: &str) -> Result<std::result::Result<Plan, String>> {
        let out = self.call("parse", text.len(), |store, b| {
            b.agent_recovery0_3_0_scenario().call_parse(store, text)
        })?;
        Ok(out.map_err(|e| e.message))
    }

    /// A call of the dead-letter rules (`dead-letters@0.3.0`): `f` gets the
    /// interface; `input_bytes` is what the call's fuel grows with.
    pub(crate) fn dead_letters<R>(
        &self,
        what: &str,
        input_bytes: usize,
        f: impl FnOnce(&mut Store<Sandbox>, &DeadLettersGuest) -> wasmtime::Result<R>,
    ) -> Result<R> {
        self.call(what, 64 + input_bytes, |store, b| {
            f(store, b.agent_recovery0_3_0_dead_letters())
        })
    }

    /// `check-outcome(outcome)`: the failure's envelope, or none for a success.
    pub(crate) fn check_outcome(&self, outcome: &str) -> Result<Option<String>> {
        let out = self.call("check-outcome", outcome.len(), |store, b| {
            b.agent_recovery0_2_0_runtime()
                .call_check_outcome(store, outcome)
        })?;
        out.map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("check-outcome refused the outcome: {}", e.message),
            )
        })
    }

    /// `render-named(envelope, format, options)`: the rendered text.
    pub(crate) fn render_named(
        &self,
        envelope: &str,
        format: &str,
        options: &str,
    ) -> Result<String> {
        let out = self.call(
            "render-named",
            envelope.len() + format.len() + options.len(),
            |store, b| {
                b.agent_recovery0_2_0_runtime()
                    .call_render_named(store, envelope, format, options)
            },
        )?;
        out.map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("render-named refused the input: {}", e.message),
            )
        })
    }
}

/// The bytes of an input's text members, and a few for the rest: what the
/// call's fuel grows with (its JSON twin's length, near enough).
fn input_bytes(input: &Input) -> usize {
    use crate::component::gen_::runtime::typed::CallResult;
    let step = |s: &crate::component::gen_::runtime::typed::StepSpec| {
        64 + s.id.len()
            + s.tool.len()
            + s.args.len()
            + s.target.as_ref().map_or(0, String::len)
            + s.fallbacks.iter().map(|f| f.len() + 3).sum::<usize>()
    };
    64 + match &input.kind {
        InputKind::Run(r) => {
            r.run_id.len()
                + r.config.as_ref().map_or(0, String::len)
                + r.first.as_ref().map_or(0, |f| step(&f.step))
        }
        InputKind::Step(s) => step(s),
        InputKind::Fanout(f) => f.id.len() + f.branches.iter().map(step).sum::<usize>(),
        InputKind::Joined(states) => states.iter().map(|s| s.len() + 3).sum(),
        InputKind::Read(values) => values
            .iter()
            .map(|v| 8 + v.key.len() + v.value.as_ref().map_or(4, String::len))
            .sum(),
        InputKind::Swapped(s) => s.current.as_ref().map_or(0, String::len),
        InputKind::Claimed(c) => c.current.as_ref().map_or(0, String::len),
        InputKind::Attempt(a) => match &a.result {
            CallResult::Ok(t) | CallResult::Failed(t) | CallResult::Response(t) => t.len(),
            CallResult::TimedOut | CallResult::UnknownTool | CallResult::NoCompensation => 0,
        },
        InputKind::Decision(d) => {
            d.decision.len()
                + d.policy
                    .as_ref()
                    .map_or(0, |p| p.name.len() + p.version.len() + p.digest.len())
        }
        InputKind::Slept
        | InputKind::Restored(_)
        | InputKind::Cancel
        | InputKind::End
        | InputKind::Recover => 0,
    }
}

/// A Wasmtime error from `what` on `input_bytes` bytes of input as an
/// [`Error`] with a kind; `memory` is the limit when a growth was refused.
fn failure(what: &str, error: wasmtime::Error, input_bytes: usize, memory: Option<usize>) -> Error {
    if let Some(limit) = memory {
        return Error::new(
            ErrorKind::MemoryLimit,
            format!(
                "the recovery loop exceeded the memory limit of {limit} bytes in `{what}` on an input of {input_bytes} bytes (state and input); keep ids, args and results small (docs/runtime.md, \"Limits\") or raise Limits::memory_bytes"
            ),
        );
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Error::new(
            ErrorKind::OutOfFuel,
            format!(
                "the recovery loop ran out of fuel in `{what}`; raise Limits::fuel_base for very large states"
            ),
        ),
        Some(trap) => Error::new(
            ErrorKind::Trap,
            format!(
                "the recovery loop trapped in `{what}` on an input of {input_bytes} bytes (state and input): {trap}; check the input against docs/runtime.md, \"Limits\", and report it with the input when it is within them"
            ),
        ),
        None => Error::new(
            ErrorKind::InvalidOutput,
            format!(
                "the recovery loop failed in `{what}`: {error:#}; this is a bug, report it with the input"
            ),
        ),
    }
}
