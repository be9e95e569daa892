//! How output is printed: the policy's JSON, or a human summary, coloured or not.
//!
//! - JSON (today's exact bytes) when `--json` is given or stdout is not a
//!   terminal; the human summary when `--human` is given or stdout is a terminal.
//! - Colour only in the human summary: `--color always`, never with `--color
//!   never`; with `--color auto` (the default) when stdout is a terminal,
//!   `NO_COLOR` is unset or empty (<https://no-color.org>) and `TERM` is not
//!   `dumb`.

use std::io::IsTerminal;

use anstyle::{AnsiColor, Style};

use crate::args::{ColorWhen, Global};

/// The output mode of one run.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// Print the human summary instead of JSON.
    pub human: bool,
    /// The palette of the human summary.
    pub paint: Paint,
}

impl Output {
    /// The mode for the global flags, the environment and the real stdout.
    pub fn new(global: &Global) -> Output {
        let terminal = std::io::stdout().is_terminal();
        let env = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        let human = global.human || (!global.json && terminal);
        let color = match global.color {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => {
                terminal && env("NO_COLOR").is_none() && env("TERM").is_none_or(|t| t != "dumb")
            }
        };
        Output {
            human,
            paint: Paint { color },
        }
    }
}

/// Wraps text in ANSI styles, or leaves it alone.
#[derive(Debug, Clone, Copy)]
pub struct Paint {
    /// Whether styles are emitted at all.
    pub color: bool,
}

impl Paint {
    /// `text` in `style`, when colour is on.
    pub fn style(self, style: Style, text: &str) -> String {
        if self.color {
            format!("{style}{text}{style:#}")
        } else {
            text.to_string()
        }
    }

    /// Labels and secondary text.
    pub fn dim(self, text: &str) -> String {
        self.style(Style::new().dimmed(), text)
    }

    /// The error code and file names.
    pub fn bold(self, text: &str) -> String {
        self.style(Style::new().bold(), text)
    }

    /// A recovery class, coloured by what it asks of the agent.
    pub fn class(self, class: &str) -> String {
        let color = match class {
            "transient" => AnsiColor::Yellow,
            "permanent" => AnsiColor::Red,
            "semantic" => AnsiColor::Magenta,
            "policy" => AnsiColor::Blue,
            "state" => AnsiColor::Cyan,
            _ => return class.to_string(),
        };
        self.style(color.on_default(), class)
    }

    /// A decision's action: green when the call goes on, red when it ends.
    pub fn action(self, action: &str) -> String {
        let color = match action {
            "retry" | "restore" | "fallback" | "replan" => AnsiColor::Green,
            "await_input" => AnsiColor::Cyan,
            _ => AnsiColor::Red,
        };
        self.style(color.on_default().bold(), action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paint_emits_ansi_only_when_colour_is_on() {
        let on = Paint { color: true };
        let off = Paint { color: false };
        assert_eq!(off.class("transient"), "transient");
        assert_eq!(off.action("retry"), "retry");
        // ECMA-48 SGR: 33 yellow foreground, 0 reset.
        assert_eq!(on.class("transient"), "\u{1b}[33mtransient\u{1b}[0m");
        assert!(on.action("fail").contains("\u{1b}[") && on.action("fail").contains("fail"));
        assert_eq!(on.class("unheard-of"), "unheard-of");
    }
}
