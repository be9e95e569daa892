//! Bindings generated from `wit/` for the world `recovery-policy`.
//!
//! Private: the public types are re-exported from [`crate::types`], and only
//! `Policy` calls the generated functions.
wasmtime::component::bindgen!({
    world: "recovery-policy",
    path: "../wit/agent-recovery@0.1.0",
    additional_derives: [PartialEq],
});

/// Bindings for the recovery loop the reference component exports next to
/// the 0.1 contract: the typed `agent:recovery/runtime@0.3.0` (`advance`),
/// the frozen `runtime@0.2.0` (`check-outcome`, `render-named`), the typed
/// `telemetry@0.3.0` (`map-lane`) and `scenario@0.3.0` (`parse`).
pub(crate) mod runtime {
    wasmtime::component::bindgen!({
        inline: "package agent-recovery:host; world runtime-host { export agent:recovery/runtime@0.2.0; export agent:recovery/runtime@0.3.0; export agent:recovery/telemetry@0.3.0; export agent:recovery/scenario@0.3.0; export agent:recovery/dead-letters@0.3.0; }",
        path: [
            "../wit/agent-recovery@0.1.0",
            "../wit/agent-recovery@0.2.0",
            "../wit/agent-recovery@0.3.0",
        ],
        world: "agent-recovery:host/runtime-host",
    });

    /// The typed loop's inputs and effects (`runtime@0.3.0`).
    pub(crate) use exports::agent::recovery0_3_0::runtime as typed;

    /// The dead-letter lifecycle rules (`dead-letters@0.3.0`).
    pub(crate) use exports::agent::recovery0_3_0::dead_letters;
    /// A scripted scenario's validated plan (`scenario@0.3.0`).
    pub(crate) use exports::agent::recovery0_3_0::scenario as plan;
    /// The mapping of a lane to spans and metrics (`telemetry@0.3.0`).
    pub(crate) use exports::agent::recovery0_3_0::telemetry as tele;
}
