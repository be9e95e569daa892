//! The reference policy's component export: world
//! `agent:recovery/recovery-runtime@0.2.0`, i.e. the frozen 0.1 policy contract
//! plus the `runtime@0.2.0` interface (the recovery loop).

crate::__export_policy_impl!(
    crate::document::Embedded,
    {
        world: "agent:recovery/recovery-runtime@0.2.0",
        path: ["../wit/agent-recovery@0.1.0", "../wit/agent-recovery@0.2.0"],
    },
    recovery0_1_0,
    impl exports::agent::recovery0_2_0::runtime::Guest for Adapter {
        fn advance(
            state: String,
            input: String,
        ) -> Result<exports::agent::recovery0_2_0::runtime::AdvanceResult, t::PolicyError> {
            let out = crate::runtime::advance(&state, &input).map_err(err)?;
            Ok(exports::agent::recovery0_2_0::runtime::AdvanceResult {
                state: out.state,
                effects: out.effects,
            })
        }

        fn check_outcome(outcome: String) -> Result<Option<String>, t::PolicyError> {
            crate::runtime::check_outcome(&outcome).map_err(err)
        }

        fn render_named(
            envelope: String,
            format: String,
            options: String,
        ) -> Result<String, t::PolicyError> {
            crate::render::render_named(&envelope, &format, &options).map_err(err)
        }
    }
);
