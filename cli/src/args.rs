//! The command line, declared with clap's derive API.
//!
//! One [`Command`] variant per subcommand; adding a subcommand is one variant
//! here and one match arm in `commands::dispatch`. `--policy`, `--config`,
//! `--json`, `--human` and `--color` are global: they may come before or after
//! the subcommand. Clap's own errors are folded into one line by
//! [`usage_error`], so every error keeps the CLI's one-line, lowercase,
//! hint-ending form.

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::Usage;

/// What follows the usage line of `--help` (the program's, not a subcommand's).
const AFTER_HELP: &str = "\
environment:
  AGENT_RECOVERY_CACHE_DIR   where compiled components are cached (empty: no cache);
                             default $XDG_CACHE_HOME/agent-recovery or ~/.cache/agent-recovery
  AGENT_RECOVERY_PRECOMPILED 0 (or false, no, off): compile the reference instead of loading
                             the one `precompile` installed next to this program
  NO_COLOR                   when set and not empty, --color auto prints no colour

output: on a terminal, classify, decide and walkthrough print a short human summary;
when stdout is not a terminal (a pipe, a file), or with --json, they print the
policy's JSON unchanged. --human forces the summary.

exit status: 0 ok, 1 the policy failed (trap, fuel, memory, invalid output), 2 bad input or usage";

/// The help layout of every command: lowercase headings, as the CLI's messages.
const TEMPLATE: &str = "{about-with-newline}\nusage: {usage}\n\n{all-args}{after-help}";

/// `agent-recovery`: normalize agent failures into error envelopes and decide
/// what to do next.
#[derive(Debug, Parser)]
#[command(
    name = "agent-recovery",
    version,
    about = "agent-recovery: normalize agent failures into error envelopes and decide what to do next",
    after_help = AFTER_HELP,
    help_template = TEMPLATE,
    subcommand_help_heading = "commands",
    subcommand_value_name = "COMMAND",
    propagate_version = true
)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: Global,
    /// The subcommand; none prints the help.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options every command takes.
#[derive(Debug, Args)]
#[command(next_help_heading = "global options")]
pub struct Global {
    /// Use this policy component (.wasm), or this policy document (.yaml,
    /// .yml, .json) packed into the reference, instead of the embedded reference policy.
    #[arg(long, global = true, value_name = "WASM|DOC")]
    pub policy: Option<String>,
    /// Refuse --policy (and `check`'s component) unless FILE.sig is a valid
    /// signature by a --trusted-key (docs/signing.md).
    #[arg(long, global = true, requires = "trusted_key")]
    pub require_signature: bool,
    /// A public key (PEM, from `policy keygen`) signed policies may be signed
    /// with; repeat for several. Used by --require-signature and `policy verify`.
    #[arg(long, global = true, value_name = "PUB")]
    pub trusted_key: Vec<String>,
    /// Policy parameters (JSON object), merged into the context's `config`.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<String>,
    /// Print the policy's JSON, also on a terminal (the default when stdout is not a terminal).
    #[arg(long, global = true, conflicts_with = "human")]
    pub json: bool,
    /// Print the human summary, also when stdout is not a terminal.
    #[arg(long, global = true)]
    pub human: bool,
    /// Colour the human summary: auto (a terminal, and NO_COLOR unset), always or never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = ColorWhen::Auto)]
    pub color: ColorWhen,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless `NO_COLOR` is set and not empty.
    Auto,
    /// Always, even in a pipe or a file.
    Always,
    /// Never.
    Never,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Normalize an observation (JSON; FILE or - for stdin) into an envelope.
    Classify(Input),
    /// Decide the next step for an observation.
    Decide(Decide),
    /// Classify and decide every observation (*.json) in a directory, then print one table.
    Walkthrough(Walkthrough),
    /// The full-jitter delay after a failed attempt: {"delay_ms":N}.
    Backoff(Backoff),
    /// The idempotency key of a tool call: {"key":"<hex sha256>"}.
    Key(Key),
    /// Every code the policy can emit (markdown is docs/errors.md).
    Registry(Registry),
    /// The MCP `## Errors` block for a tool description.
    ErrorsBlock(ErrorsBlock),
    /// The JSON Schema of an output: envelope, decision or code-info.
    Schema(Schema),
    /// Render an envelope, a decision's envelope or (classified first) an observation for a boundary.
    Render(Render),
    /// Compile, link and smoke-test a policy component; prints its identity.
    Check(Check),
    /// Decide for each JSON line on stdin; one JSON line out per line in.
    Serve(Serve),
    /// Run a scripted scenario through the recovery runtime on a virtual clock
    /// and print the timeline (a table on a terminal, JSON otherwise or with --json).
    Simulate(Simulate),
    /// List the interrupted runs and pending replays a worker's `recover`
    /// would finish (docs/durability.md); a table on a terminal, JSON lines otherwise.
    Recover(Recover),
    /// The dead-letter queue of a store: list, show, replay, purge, depth.
    Dlq(Dlq),
    /// Policy documents: validate one and pack it into a component.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Run a directory of policy tests (YAML/JSON) against --policy; exit 1 on a failure.
    Test(Test),
    /// Compile the embedded reference policy for this machine into the
    /// installation, where later starts load it instead of compiling it.
    Precompile(Precompile),
    /// Print the version of this program.
    Version,
}

/// `policy`.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Validate a policy document (YAML or JSON) and pack it into a copy of
    /// the reference component; prints its identity and document digest.
    Pack(PolicyPack),
    /// Decide every line of a decision log again with --policy (the
    /// candidate; default: the reference) and print each decision that would
    /// change; exit 1 when one does (docs/decision-logs.md).
    Replay(PolicyReplay),
    /// Make an Ed25519 signing key: KEY (private, PKCS#8 PEM) and KEY.pub (public).
    Keygen(PolicyKeygen),
    /// Sign a policy file (component or document): writes FILE.sig.
    Sign(PolicySign),
    /// Check FILE.sig against --trusted-key; exit 0 when it holds, 1 when not.
    Verify(PolicyVerify),
}

/// `policy replay`.
#[derive(Debug, Args)]
pub struct PolicyReplay {
    /// The decision log (JSON lines a runtime's decision_log wrote); - reads stdin.
    #[arg(value_name = "LOG")]
    pub log: String,
}

/// `policy keygen`.
#[derive(Debug, Args)]
pub struct PolicyKeygen {
    /// Where to write the private key (the public key goes to KEY.pub).
    #[arg(long, value_name = "KEY")]
    pub out: String,
    /// Overwrite existing key files.
    #[arg(long)]
    pub force: bool,
}

/// `policy sign`.
#[derive(Debug, Args)]
pub struct PolicySign {
    /// The policy file to sign (.wasm, .yaml, .yml, .json): its exact bytes are signed.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// The private key (from `policy keygen`).
    #[arg(long, value_name = "KEY")]
    pub key: String,
}

/// `policy verify`.
#[derive(Debug, Args)]
pub struct PolicyVerify {
    /// The signed policy file (its signature is FILE.sig).
    #[arg(value_name = "FILE")]
    pub file: String,
}

/// `policy pack`.
#[derive(Debug, Args)]
pub struct PolicyPack {
    /// The policy document (.yaml, .yml or .json).
    #[arg(value_name = "DOC")]
    pub document: String,
    /// Where to write the component.
    #[arg(short, long, value_name = "WASM")]
    pub output: String,
}

/// `test`.
#[derive(Debug, Args)]
pub struct Test {
    /// The directory of test files (*.yaml, *.yml, *.json, in name order).
    #[arg(value_name = "DIR")]
    pub dir: String,
}

/// An observation input.
#[derive(Debug, Args)]
pub struct Input {
    /// The observation file; - or nothing reads stdin.
    #[arg(value_name = "FILE")]
    pub file: Option<String>,
}

/// `decide`.
#[derive(Debug, Args)]
pub struct Decide {
    /// The observation file; - or nothing reads stdin.
    #[arg(value_name = "FILE")]
    pub file: Option<String>,
    /// The decision context's members (flags win over the observation's `context`).
    #[command(flatten)]
    pub context: ContextFlags,
}

/// The context members `decide` and `walkthrough` take as flags.
#[derive(Debug, Default, Args)]
pub struct ContextFlags {
    /// The kind of call that failed [default: from the observation].
    #[arg(long, value_enum, value_name = "KIND")]
    pub call: Option<CallArg>,
    /// The attempt that just failed, from 1 [default: 1].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub attempt: Option<u32>,
    /// Retry delay already spent in this run, in ms [default: 0].
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub elapsed_ms: Option<u64>,
    /// Seed for the jitter (reproducible decisions) [default: WASI random].
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub seed: Option<u64>,
    /// The caller's clock, Unix ms (for an HTTP-date Retry-After without Date).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub now_ms: Option<u64>,
}

/// `walkthrough`.
#[derive(Debug, Args)]
pub struct Walkthrough {
    /// The directory of observation files (*.json, in name order).
    #[arg(value_name = "DIR", default_value = "examples/observations")]
    pub dir: String,
    /// The decision context's members, for every observation.
    #[command(flatten)]
    pub context: ContextFlags,
}

/// `--call`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CallArg {
    /// A tool call.
    Tool,
    /// An LLM call.
    Llm,
    /// A call to another agent.
    Agent,
}

impl CallArg {
    /// The name in the context JSON.
    pub fn name(self) -> &'static str {
        match self {
            CallArg::Tool => "tool",
            CallArg::Llm => "llm",
            CallArg::Agent => "agent",
        }
    }
}

/// `backoff`.
#[derive(Debug, Args)]
pub struct Backoff {
    /// The kind of call.
    #[arg(long, value_enum, value_name = "KIND")]
    pub call: CallArg,
    /// The attempt that just failed, from 1.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub attempt: u32,
    /// Seed for the jitter [default: WASI random].
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub seed: Option<u64>,
}

/// `key`.
#[derive(Debug, Args)]
pub struct Key {
    /// The run's id.
    #[arg(long, value_name = "R")]
    pub run_id: String,
    /// The step's id within the run.
    #[arg(long, value_name = "S")]
    pub step_id: String,
    /// The tool's name.
    #[arg(long, value_name = "T")]
    pub tool: String,
    /// The tool call's arguments (JSON; key order does not matter).
    #[arg(long, value_name = "JSON", allow_hyphen_values = true)]
    pub args: String,
}

/// `registry`.
#[derive(Debug, Args)]
pub struct Registry {
    /// The output format.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = RegistryFormat::Json)]
    pub format: RegistryFormat,
    /// Write to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<String>,
}

/// `registry --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RegistryFormat {
    /// The registry as JSON.
    Json,
    /// docs/errors.md.
    #[value(alias = "md")]
    Markdown,
}

/// `errors-block`.
#[derive(Debug, Args)]
pub struct ErrorsBlock {
    /// Codes or prefixes such as tool.http.; none means all.
    #[arg(value_name = "PREFIX")]
    pub prefixes: Vec<String>,
}

/// `schema`.
#[derive(Debug, Args)]
pub struct Schema {
    /// envelope, decision or code-info.
    #[arg(value_name = "NAME")]
    pub name: String,
}

/// `render`.
#[derive(Debug, Args)]
pub struct Render {
    /// jsonrpc-error, mcp-tool-result, a2a-task-status, problem-json, model-tool-result,
    /// coordinator-text or downstream-wrap.
    #[arg(long = "as", value_name = "FORMAT")]
    pub format: String,
    /// The input file; - or nothing reads stdin.
    #[arg(value_name = "FILE")]
    pub file: Option<String>,
    /// {"id","task_id","context_id","current_agent","downstream_agent"}.
    #[arg(long, value_name = "JSON", allow_hyphen_values = true)]
    pub options: Option<String>,
}

/// `check`.
#[derive(Debug, Args)]
pub struct Check {
    /// The component to check.
    #[arg(value_name = "WASM")]
    pub wasm: String,
}

/// `precompile`.
#[derive(Debug, Args)]
pub struct Precompile {
    /// Where to write <sha256>.cwasm [default: lib/agent-recovery beside the
    /// directory of this program, e.g. /usr/local/lib/agent-recovery for
    /// /usr/local/bin/agent-recovery].
    #[arg(long, value_name = "DIR")]
    pub out: Option<String>,
}

/// `serve`.
#[derive(Debug, Args)]
pub struct Serve {
    /// Reload --policy when the file changes.
    #[arg(long)]
    pub watch: bool,
    /// The sha256 (hex) --policy must have.
    #[arg(long, value_name = "HEX")]
    pub sha256: Option<String>,
    /// What a call gets when the policy fails: its error, or the reference's answer.
    #[arg(long, value_enum, value_name = "WHAT", default_value_t = OnFailure::Closed)]
    pub on_failure: OnFailure,
    /// How often --watch checks the file, in ms.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 500,
        allow_negative_numbers = true
    )]
    pub poll_ms: u64,
}

/// `simulate`.
#[derive(Debug, Args)]
pub struct Simulate {
    /// The scenario file (JSON, docs/runtime.md); - reads stdin.
    #[arg(value_name = "SCENARIO")]
    pub scenario: String,
    /// Run against this store instead of memory, so runs share breakers,
    /// attempt counts, the idempotency cache and dead letters: a SQLite store
    /// file, or a redis://host:port/db URL (docs/store.md).
    #[arg(long, value_name = "PATH|URL")]
    pub store: Option<String>,
    /// Write the run's spans to this file as OTLP JSON, one
    /// ExportTraceServiceRequest per line (docs/telemetry.md).
    #[arg(long, value_name = "FILE")]
    pub trace_out: Option<String>,
}

/// `--store`: where the store is: a SQLite store file, or a `redis://` URL.
#[derive(Debug, Args)]
pub struct StoreArg {
    /// The store: a SQLite store file written by any runtime (it must
    /// exist), or a redis://host:port/db URL (docs/store.md).
    #[arg(long, value_name = "PATH|URL")]
    pub store: String,
}

/// `recover`.
#[derive(Debug, Args)]
pub struct Recover {
    /// The store.
    #[command(flatten)]
    pub store: StoreArg,
    /// List journal entries written at least this long ago [default: 300000,
    /// the runtime's in_flight_ttl_ms].
    #[arg(long, value_name = "MS")]
    pub older_than_ms: Option<u64>,
}

/// `dlq`.
#[derive(Debug, Args)]
pub struct Dlq {
    /// What to do.
    #[command(subcommand)]
    pub action: DlqAction,
}

/// `dlq` subcommands.
#[derive(Debug, Subcommand)]
pub enum DlqAction {
    /// The records, oldest first (not the purged ones unless --all).
    List {
        /// The store.
        #[command(flatten)]
        store: StoreArg,
        /// Purged records too.
        #[arg(long)]
        all: bool,
    },
    /// One record with its status and replays.
    Show {
        /// The record id (its sequence number, from `dlq list`).
        #[arg(value_name = "ID")]
        id: String,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// Request a replay for a worker's `recover` to carry out; prints its key.
    Replay {
        /// The record id.
        #[arg(value_name = "ID")]
        id: String,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// Mark a record purged (the stream keeps it; `list` hides it).
    Purge {
        /// The record id.
        #[arg(value_name = "ID")]
        id: String,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// Records not replayed successfully nor purged: {"depth":N}.
    Depth {
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
}

/// `serve --on-failure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnFailure {
    /// The caller gets the error.
    Closed,
    /// The embedded reference answers instead.
    Reference,
}

/// The clap command with the CLI's help layout on every subcommand:
/// lowercase headings (`arguments:`, `options:`) like the rest of the output.
pub fn command() -> clap::Command {
    let mut command = Cli::command()
        .mut_subcommands(|sub| lowercase_headings(sub.help_template(TEMPLATE)))
        .help_template(TEMPLATE);
    // The generated --help and --version flags exist only once built.
    command.build();
    lowercase_headings(command).mut_subcommands(lowercase_headings)
}

fn lowercase_headings(command: clap::Command) -> clap::Command {
    command.mut_args(|arg| match (arg.get_help_heading(), arg.is_positional()) {
        (Some(_), _) => arg,
        (None, true) => arg.help_heading("arguments"),
        (None, false) => arg.help_heading("options"),
    })
}

/// What parsing the command line gives.
pub enum Parsed {
    /// Run this.
    Run(Box<Cli>),
    /// Print this text (help or version) on stdout and exit 0.
    Print(String),
}

/// Parses `args` (without the program name).
pub fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Parsed, Usage> {
    let args: Vec<std::ffi::OsString> = args.into_iter().collect();
    let mut command = command();
    // The subcommand named on the line, for the hint of an error.
    let named = args
        .iter()
        .filter_map(|a| a.to_str())
        .find(|a| command.find_subcommand(a).is_some())
        .map(str::to_string);
    let argv = std::iter::once("agent-recovery".into()).chain(args);
    let matches = match command.try_get_matches_from_mut(argv) {
        Ok(matches) => matches,
        Err(e) => {
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp => Ok(Parsed::Print(e.render().to_string())),
                // The program's version, also for `SUBCOMMAND --version`.
                clap::error::ErrorKind::DisplayVersion => Ok(Parsed::Print(VERSION.into())),
                _ => Err(usage_error(&e, named.as_deref())),
            };
        }
    };
    let cli = Cli::from_arg_matches(&matches).map_err(|e| usage_error(&e, named.as_deref()))?;
    if cli.command.is_none() {
        return Ok(Parsed::Print(command.render_help().to_string()));
    }
    Ok(Parsed::Run(Box::new(cli)))
}

/// `agent-recovery <version>`, what `version`, `--version` and `-V` print.
pub const VERSION: &str = concat!("agent-recovery ", env!("CARGO_PKG_VERSION"));

/// A clap error as one lowercase line that ends with a hint.
///
/// Clap renders `error: <message>`, indented detail lines (`[possible values:
/// ...]`, `tip: ...`), a `Usage:` line and `For more information, try
/// '--help'.`; the message and details are kept, joined with `; `, and the
/// hint names the help of `subcommand` (the one named on the line, if any).
pub fn usage_error(error: &clap::Error, subcommand: Option<&str>) -> Usage {
    let text = error.render().to_string();
    let mut parts: Vec<String> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("Usage: ") || line.starts_with("For more information") {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        let line = line.strip_prefix("tip: ").unwrap_or(line);
        let line = line
            .strip_prefix('[')
            .and_then(|l| l.strip_suffix(']'))
            .unwrap_or(line);
        match parts.last_mut() {
            Some(last) if last.ends_with(':') => {
                last.push(' ');
                last.push_str(line);
            }
            _ => parts.push(line.to_string()),
        }
    }
    let help = match subcommand {
        Some(name) => format!("agent-recovery {name} --help"),
        None => "agent-recovery --help".to_string(),
    };
    Usage(format!("{}; run `{help}` for usage", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<Parsed, Usage> {
        parse(s.split_whitespace().map(std::ffi::OsString::from))
    }

    fn cli(s: &str) -> Cli {
        match parse_str(s) {
            Ok(Parsed::Run(cli)) => *cli,
            Ok(Parsed::Print(text)) => panic!("{s}: printed {text}"),
            Err(e) => panic!("{s}: {e}"),
        }
    }

    fn err(s: &str) -> String {
        match parse_str(s) {
            Err(Usage(e)) => e,
            Ok(_) => panic!("{s}: parsed"),
        }
    }

    #[test]
    fn the_clap_declaration_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn flags_in_both_forms_and_globals_anywhere() {
        let c = cli("--policy p.wasm decide obs.json --attempt=2 --seed 7");
        assert_eq!(c.global.policy.as_deref(), Some("p.wasm"));
        let Some(Command::Decide(d)) = c.command else {
            panic!("decide")
        };
        assert_eq!(d.file.as_deref(), Some("obs.json"));
        assert_eq!(d.context.attempt, Some(2));
        assert_eq!(d.context.seed, Some(7));
        let c = cli("classify - --policy p.wasm --json");
        assert!(c.global.json);
        assert_eq!(c.global.policy.as_deref(), Some("p.wasm"));
        assert!(matches!(c.command, Some(Command::Classify(Input { file: Some(f) })) if f == "-"));
    }

    #[test]
    fn help_and_version_are_printed_for_the_program_and_each_subcommand() {
        for line in [
            "--help",
            "-h",
            "help",
            "decide --help",
            "decide -h",
            "help decide",
        ] {
            let Ok(Parsed::Print(text)) = parse_str(line) else {
                panic!("{line}")
            };
            assert!(text.contains("usage: agent-recovery"), "{line}: {text}");
            assert!(
                !text.contains("Options:") && !text.contains("Arguments:"),
                "lowercase headings: {text}"
            );
        }
        for line in ["--version", "-V", "decide --version", "serve -V"] {
            let Ok(Parsed::Print(text)) = parse_str(line) else {
                panic!("{line}")
            };
            assert_eq!(text.trim_end(), "agent-recovery 0.1.0", "{line}");
        }
    }

    #[test]
    fn errors_are_one_line_with_a_hint() {
        for (line, needle, help) in [
            (
                "decide --attempt",
                "a value is required for '--attempt",
                "decide",
            ),
            ("decide -x", "unexpected argument '-x'", "decide"),
            (
                "decide --seed 1 --seed 2",
                "cannot be used multiple times",
                "decide",
            ),
            (
                "classify --attempt 1",
                "unexpected argument '--attempt'",
                "classify",
            ),
            ("classify a b", "unexpected argument 'b'", "classify"),
            ("frobnicate", "unrecognized subcommand 'frobnicate'", ""),
            (
                "decide --call robot",
                "'robot' for '--call <KIND>'; possible values: tool, llm, agent",
                "decide",
            ),
            (
                "backoff --attempt 1",
                "required arguments were not provided: --call",
                "backoff",
            ),
            (
                "serve --watch=yes",
                "unexpected value 'yes' for '--watch'",
                "serve",
            ),
            (
                "--json --human classify",
                "'--json' cannot be used with '--human'",
                "classify",
            ),
        ] {
            let e = err(line);
            assert!(e.contains(needle), "{line}: {e}");
            let help = format!("agent-recovery {help} --help").replace("  ", " ");
            assert!(
                e.ends_with(&format!("; run `{help}` for usage")),
                "{line}: {e}"
            );
            assert!(!e.contains('\n') && !e.starts_with("error"), "{line}: {e}");
        }
    }

    #[test]
    fn numbers_are_checked() {
        assert!(
            err("backoff --call tool --attempt x").contains("invalid value 'x' for '--attempt")
        );
        assert!(err("decide --seed -1").contains("invalid value '-1' for '--seed"));
        let c = cli("backoff --call llm --attempt 3");
        assert!(matches!(
            c.command,
            Some(Command::Backoff(Backoff {
                call: CallArg::Llm,
                attempt: 3,
                seed: None
            }))
        ));
    }

    #[test]
    fn signature_flags_are_global_and_require_a_trusted_key() {
        let c = cli("decide obs.json --require-signature --trusted-key a.pub --trusted-key b.pub");
        assert!(c.global.require_signature);
        assert_eq!(c.global.trusted_key, ["a.pub", "b.pub"]);
        let e = err("--require-signature decide obs.json");
        assert!(e.contains("--trusted-key <PUB>"), "{e}");
        let c = cli("policy verify p.yaml --trusted-key a.pub");
        assert!(
            matches!(c.command, Some(Command::Policy(PolicyCommand::Verify(v))) if v.file == "p.yaml")
        );
    }

    #[test]
    fn no_command_prints_the_help() {
        let Ok(Parsed::Print(text)) = parse_str("") else {
            panic!("help")
        };
        assert!(
            text.contains("commands:") && text.contains("global options:"),
            "{text}"
        );
    }
}
