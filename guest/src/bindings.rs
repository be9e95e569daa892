//! The reference policy's component export.

crate::export_policy!(crate::sdk::Reference, "../wit");
