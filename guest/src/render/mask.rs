//! Masking of internal details before an envelope crosses a boundary
//! (never expose stack traces, file paths, environment values). This edits
//! outgoing text; it never influences classification.

/// Mask one line of outgoing text: keep the first line only (stack traces are
/// multi-line), replace absolute file paths with `[path]`, the values of
/// `NAME=value` environment assignments with `[redacted]`, and bearer tokens and
/// API keys (`sk-...`, `Bearer ...`) with `[redacted]`.
pub fn mask(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut out: Vec<String> = Vec::new();
    let mut redact_next = false;
    for word in line.split(' ') {
        if redact_next {
            out.push("[redacted]".to_owned());
            redact_next = false;
            continue;
        }
        if word.eq_ignore_ascii_case("bearer") {
            out.push(word.to_owned());
            redact_next = true;
            continue;
        }
        out.push(mask_word(word));
    }
    out.join(" ")
}

fn mask_word(word: &str) -> String {
    let core = word.trim_matches(|c: char| {
        matches!(
            c,
            '(' | ')' | '"' | '\'' | ',' | ';' | '[' | ']' | '<' | '>'
        )
    });
    if core.is_empty() {
        return word.to_owned();
    }
    if is_path(core) {
        return word.replace(core, "[path]");
    }
    if is_secret(core) {
        return word.replace(core, "[redacted]");
    }
    if let Some((name, value)) = core.split_once('=')
        && !value.is_empty()
        && is_env_name(name)
    {
        return word.replace(core, &format!("{name}=[redacted]"));
    }
    word.to_owned()
}

fn is_path(w: &str) -> bool {
    let unix = w.starts_with('/') && w.get(1..).is_some_and(|rest| rest.contains('/'));
    let home = w.starts_with("~/");
    let bytes = w.as_bytes();
    let windows = bytes.len() > 2
        && bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && bytes.get(1) == Some(&b':')
        && matches!(bytes.get(2), Some(b'\\' | b'/'));
    let file_url = w.starts_with("file://");
    unix || home || windows || file_url
}

fn is_secret(w: &str) -> bool {
    [
        "sk-", "sk_live_", "sk_test_", "rk_live_", "ghp_", "xoxb-", "AKIA",
    ]
    .iter()
    .any(|p| w.starts_with(p) && w.len() >= p.len() + 8)
}

fn is_env_name(name: &str) -> bool {
    name.len() >= 2
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        && name.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::mask;

    #[test]
    fn masks_paths_env_and_secrets() {
        assert_eq!(
            mask(
                "open failed: /srv/app/config.yaml (DATABASE_URL=postgres://u:p@db) key sk-abcdefghijklmnop"
            ),
            "open failed: [path] (DATABASE_URL=[redacted]) key [redacted]"
        );
        assert_eq!(
            mask("Authorization: Bearer abc.def"),
            "Authorization: Bearer [redacted]"
        );
        assert_eq!(mask("C:\\Users\\me\\app.py failed"), "[path] failed");
        assert_eq!(
            mask("Traceback (most recent call last):\n  File \"/x/y.py\""),
            "Traceback (most recent call last):"
        );
        assert_eq!(
            mask("Rate limit of 60/min reached"),
            "Rate limit of 60/min reached"
        );
    }
}
