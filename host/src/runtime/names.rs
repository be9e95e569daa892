//! Names the loop takes (a run id, a step or fan-out id, a tool, a target)
//! are bounded by the loop itself; the runtime refuses a longer one before
//! it reaches the component, so an oversized id never costs a copy into the
//! sandbox nor a trap there.

use crate::error::{Error, ErrorKind, PolicyErrorKind};

/// The longest name, in UTF-8 bytes: the loop component's `MAX_ID_BYTES`
/// (docs/runtime.md, "Limits"). A test feeds the component a name of this
/// length and one byte more, so the two cannot drift apart.
pub const MAX_ID_BYTES: usize = 512;

/// `Err(too-large)` naming `what` when `name` is over [`MAX_ID_BYTES`].
pub(crate) fn check(what: &str, name: &str) -> Result<(), Error> {
    if name.len() > MAX_ID_BYTES {
        return Err(Error::new(
            ErrorKind::Policy(PolicyErrorKind::TooLarge),
            format!(
                "`{what}` is {} bytes, over the {MAX_ID_BYTES}-byte limit of a name; use a shorter name (a hash of a long one) and put data in `args`",
                name.len()
            ),
        ));
    }
    Ok(())
}
