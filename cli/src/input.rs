//! Reading inputs: a FILE, `-` or nothing (stdin), size-capped and UTF-8 checked.

use std::io::Read;

use anyhow::Context as _;
use serde_json::Value;

use crate::Usage;

/// Input text and the name used for it in messages.
pub struct Input {
    /// `FILE` or `stdin`.
    pub name: String,
    /// The text.
    pub text: String,
}

/// Reads `path` (`None` or `-` is stdin), at most `max` bytes.
pub fn read(path: Option<&str>, max: usize) -> anyhow::Result<Input> {
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let (name, bytes) = match path {
        None | Some("-") => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .lock()
                .take(limit)
                .read_to_end(&mut bytes)
                .map_err(|e| {
                    Usage(format!(
                        "cannot read stdin: {e}; pipe a JSON observation in or name a FILE"
                    ))
                })?;
            ("stdin".to_string(), bytes)
        }
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|e| Usage(format!("cannot read {path}: {e}; check the path")))?;
            let mut bytes = Vec::new();
            file.take(limit)
                .read_to_end(&mut bytes)
                .map_err(|e| Usage(format!("cannot read {path}: {e}; check the path")))?;
            (path.to_string(), bytes)
        }
    };
    if bytes.len() > max {
        return Err(Usage(format!(
            "{name} is larger than the input limit of {max} bytes; send a smaller input (truncate the body)"
        ))
        .into());
    }
    let text = agent_recovery::utf8(&bytes)
        .with_context(|| name.clone())?
        .to_string();
    Ok(Input { name, text })
}

/// Reads the `--config FILE` JSON object, if given.
pub fn config(path: Option<&str>) -> anyhow::Result<Option<serde_json::Map<String, Value>>> {
    let Some(path) = path else { return Ok(None) };
    let input = read(Some(path), 1 << 20)?;
    match serde_json::from_str::<Value>(&input.text) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(_) => Err(Usage(format!(
            "config {path} is not a JSON object; write e.g. {{\"tool\":{{\"base_ms\":250,\"cap_ms\":30000,\"max_attempts\":5}}}}"
        ))
        .into()),
        Err(e) => Err(Usage(format!(
            "config {path} is not valid JSON ({e}); write a JSON object of policy parameters"
        ))
        .into()),
    }
}
