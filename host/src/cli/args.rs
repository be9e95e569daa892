//! Command-line parsing: a command, positionals and `--flag value` pairs.
//!
//! Hand-rolled to keep the build lean. Flags take exactly one value, given as
//! `--flag value` or `--flag=value`, except the switches in [`SWITCHES`],
//! which take none; `-` alone is a positional (stdin).

use std::collections::BTreeMap;

use crate::cli::Usage;

/// Parsed arguments.
#[derive(Debug, Default)]
pub struct Args {
    /// The subcommand.
    pub command: String,
    /// Positionals after the command.
    pub positionals: Vec<String>,
    flags: BTreeMap<String, String>,
}

/// Flags every command accepts.
const GLOBAL: &[&str] = &["policy", "config"];

/// Flags that take no value (`--watch`).
const SWITCHES: &[&str] = &["watch", "json"];

impl Args {
    /// Parses `args` (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, Usage> {
        let mut out = Args::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if let Some(flag) = arg.strip_prefix("--") {
                let (name, value) = match flag.split_once('=') {
                    Some((name, _)) if SWITCHES.contains(&name) => {
                        return Err(Usage(format!(
                            "--{name} takes no value; write --{name} alone"
                        )));
                    }
                    Some((name, value)) => (name.to_string(), value.to_string()),
                    None if SWITCHES.contains(&flag) => (flag.to_string(), String::new()),
                    None => {
                        let value = args.next().ok_or_else(|| {
                            Usage(format!("--{flag} needs a value; e.g. --{flag} VALUE"))
                        })?;
                        (flag.to_string(), value)
                    }
                };
                if out.flags.insert(name.clone(), value).is_some() {
                    return Err(Usage(format!(
                        "--{name} is given twice; give each flag once"
                    )));
                }
            } else if arg.starts_with('-') && arg != "-" {
                return Err(Usage(format!(
                    "unknown option '{arg}'; run `agent-recovery help` for usage"
                )));
            } else if out.command.is_empty() {
                out.command = arg;
            } else {
                out.positionals.push(arg);
            }
        }
        Ok(out)
    }

    /// Fails on flags the command does not take and on extra positionals.
    pub fn allow(&self, flags: &[&str], max_positionals: usize) -> Result<(), Usage> {
        let command = &self.command;
        for name in self.flags.keys() {
            if !flags.contains(&name.as_str()) && !GLOBAL.contains(&name.as_str()) {
                return Err(Usage(format!(
                    "`{command}` does not take --{name}; run `agent-recovery help` for usage"
                )));
            }
        }
        if let Some(extra) = self.positionals.get(max_positionals) {
            return Err(Usage(format!(
                "unexpected argument '{extra}' for `{command}`; run `agent-recovery help` for usage"
            )));
        }
        Ok(())
    }

    /// The value of `--name`, if given.
    pub fn flag(&self, name: &str) -> Option<&str> {
        self.flags.get(name).map(String::as_str)
    }

    /// Whether the switch `--name` (one of [`SWITCHES`]) was given.
    pub fn switch(&self, name: &str) -> bool {
        self.given(name)
    }

    /// Whether `--name` was given, with or without a value.
    pub fn given(&self, name: &str) -> bool {
        self.flags.contains_key(name)
    }

    /// The value of `--name`, which must be given.
    pub fn required(&self, name: &str, example: &str) -> Result<&str, Usage> {
        self.flag(name).ok_or_else(|| {
            Usage(format!(
                "`{}` needs --{name}; e.g. --{name} {example}",
                self.command
            ))
        })
    }

    /// The value of `--name` parsed as a number, if given.
    pub fn number<T: std::str::FromStr>(&self, name: &str, what: &str) -> Result<Option<T>, Usage> {
        self.flag(name)
            .map(|v| {
                v.parse()
                    .map_err(|_| Usage(format!("invalid --{name} '{v}': expected {what}")))
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, Usage> {
        Args::parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn flags_in_both_forms_and_anywhere() {
        let a = parse("--policy p.wasm decide obs.json --attempt=2 --seed 7").unwrap();
        assert_eq!(a.command, "decide");
        assert_eq!(a.positionals, ["obs.json"]);
        assert_eq!(a.flag("attempt"), Some("2"));
        assert_eq!(a.flag("seed"), Some("7"));
        assert_eq!(a.flag("policy"), Some("p.wasm"));
    }

    #[test]
    fn stdin_dash_is_positional() {
        let a = parse("classify -").unwrap();
        assert_eq!(a.positionals, ["-"]);
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        assert!(parse("decide --attempt").is_err());
        assert!(parse("decide -x").is_err());
        assert!(parse("decide --seed 1 --seed 2").is_err());
        let a = parse("classify --attempt 1").unwrap();
        assert!(a.allow(&[], 1).is_err());
        let a = parse("classify a b").unwrap();
        assert!(a.allow(&[], 1).is_err());
    }

    #[test]
    fn switches_take_no_value() {
        let a = parse("serve --watch --policy p.wasm").unwrap();
        assert!(a.switch("watch"));
        assert_eq!(a.flag("policy"), Some("p.wasm"));
        assert!(a.positionals.is_empty());
        assert!(!parse("serve").unwrap().switch("watch"));
        assert!(parse("serve --watch=yes").is_err());
    }

    #[test]
    fn numbers_are_checked() {
        let a = parse("backoff --attempt x").unwrap();
        assert!(a.number::<u32>("attempt", "a whole number").is_err());
        let a = parse("backoff --attempt 3").unwrap();
        assert_eq!(
            a.number::<u32>("attempt", "a whole number").unwrap(),
            Some(3)
        );
    }
}
