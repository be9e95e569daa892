//! Bindings generated from `wit/` for the world `recovery-policy`.
//!
//! Private: the public types are re-exported from [`crate::types`], and only
//! `Policy` calls the generated functions.
wasmtime::component::bindgen!({
    world: "recovery-policy",
    path: "../wit",
    additional_derives: [PartialEq],
});
