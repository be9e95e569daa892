//! The subcommands.

use std::io::Write;
use std::path::PathBuf;

use agent_recovery::{Loader, Policy};
use anyhow::Context as _;
use serde_json::json;

use crate::cli::{Args, HELP, Usage, context, input, render, serve};

/// Runs the command named in `args`.
pub fn dispatch(args: &Args) -> anyhow::Result<()> {
    match args.command.as_str() {
        "classify" => classify(args),
        "decide" => decide(args),
        "backoff" => backoff(args),
        "key" => key(args),
        "registry" => registry(args),
        "errors-block" => errors_block(args),
        "schema" => schema(args),
        "render" => render(args),
        "check" => check(args),
        "serve" => serve::serve(args, loader()),
        "simulate" => {
            args.allow(&["json", "store"], 1)?;
            let scenario = args.positionals.first().cloned().ok_or_else(|| {
                Usage("`simulate` needs a SCENARIO file (or -); e.g. agent-recovery simulate scenario.json --json".into())
            })?;
            print(&crate::cli::simulate::run(
                crate::cli::simulate::SimulateOptions {
                    scenario,
                    json: args.switch("json"),
                    store: args.flag("store").map(PathBuf::from),
                    policy: args.flag("policy").map(PathBuf::from),
                    loader: loader(),
                },
            )?)
        }
        "help" | "" => print(HELP.trim_end()),
        "version" => print(concat!("agent-recovery ", env!("CARGO_PKG_VERSION"))),
        other => Err(Usage(format!(
            "unknown command '{other}'; run `agent-recovery help` for the list"
        ))
        .into()),
    }
}

fn classify(args: &Args) -> anyhow::Result<()> {
    args.allow(&[], 1)?;
    let policy = load(args)?;
    let obs = read(args, &policy)?;
    let envelope = policy.classify_json(&obs.text).context(obs.name)?;
    print(&envelope)
}

fn decide(args: &Args) -> anyhow::Result<()> {
    args.allow(&["call", "attempt", "elapsed-ms", "seed", "now-ms"], 1)?;
    let config = input::config(args.flag("config"))?;
    let policy = load(args)?;
    let obs = read(args, &policy)?;
    let ctx = context::decide_context(args, &obs.text, config)?;
    let decision = policy.decide_json(&obs.text, &ctx).context(obs.name)?;
    print(&decision)
}

fn backoff(args: &Args) -> anyhow::Result<()> {
    args.allow(&["call", "attempt", "seed"], 0)?;
    let call = context::call_kind(args.required("call", "tool")?)?;
    let attempt = args
        .number::<u32>("attempt", "a whole number from 1, e.g. --attempt 1")?
        .ok_or_else(|| Usage("`backoff` needs --attempt; e.g. --attempt 1".into()))?;
    let seed = args.number::<u64>("seed", "a whole number from 0 to 2^64-1")?;
    let config = match (args.flag("config"), input::config(args.flag("config"))?) {
        (Some(path), Some(map)) => Some(context::policy_config(path, map)?),
        _ => None,
    };
    let policy = load(args)?;
    let delay = policy.backoff(call, attempt, seed, config)?;
    print(&json!({ "delay_ms": delay }).to_string())
}

fn key(args: &Args) -> anyhow::Result<()> {
    args.allow(&["run-id", "step-id", "tool", "args"], 0)?;
    let run_id = args.required("run-id", "run-1")?;
    let step_id = args.required("step-id", "step-1")?;
    let tool = args.required("tool", "search")?;
    let tool_args = args.required("args", "'{\"q\":\"x\"}'")?;
    let policy = load(args)?;
    let key = policy
        .key(run_id, step_id, tool, tool_args)
        .context("--args")?;
    print(&json!({ "key": key }).to_string())
}

fn registry(args: &Args) -> anyhow::Result<()> {
    args.allow(&["format", "output"], 0)?;
    let policy = load(args)?;
    let text = match args.flag("format").unwrap_or("json") {
        "json" => policy.registry_json()?,
        "markdown" | "md" => policy.registry_markdown()?,
        other => {
            return Err(Usage(format!(
                "invalid --format '{other}': expected json or markdown"
            ))
            .into());
        }
    };
    match args.flag("output") {
        Some(path) => write_file(path, &text),
        None => print(text.strip_suffix('\n').unwrap_or(&text)),
    }
}

fn errors_block(args: &Args) -> anyhow::Result<()> {
    args.allow(&[], usize::MAX)?;
    let policy = load(args)?;
    let block = policy.errors_block(&args.positionals)?;
    print(block.strip_suffix('\n').unwrap_or(&block))
}

fn schema(args: &Args) -> anyhow::Result<()> {
    args.allow(&[], 1)?;
    let name = args.positionals.first().ok_or_else(|| {
        Usage("`schema` needs a name; e.g. agent-recovery schema decision".into())
    })?;
    let policy = load(args)?;
    match policy.json_schema(name)? {
        Some(schema) => print(&schema),
        None => Err(Usage(format!(
            "unknown schema '{name}': expected envelope, decision or code-info"
        ))
        .into()),
    }
}

fn render(args: &Args) -> anyhow::Result<()> {
    args.allow(&["as", "options"], 1)?;
    render::format(args.required("as", "jsonrpc-error")?)?;
    let policy = load(args)?;
    let input = read(args, &policy)?;
    print(&render::render(args, &policy, &input)?)
}

fn check(args: &Args) -> anyhow::Result<()> {
    args.allow(&[], 1)?;
    let path = args.positionals.first().ok_or_else(|| {
        Usage("`check` needs the component to check; e.g. agent-recovery check policy.wasm".into())
    })?;
    let policy = loader().file(path).context(path.clone())?;
    let verified = policy.verify().context(path.clone())?;
    let info = verified.info;
    print(
        &json!({
            "name": info.name,
            "version": info.version,
            "contract": info.contract,
            "description": info.description,
            "world": agent_recovery::WORLD,
            "sha256": policy.sha256(),
            "smoke_tests": verified.smoke_cases,
        })
        .to_string(),
    )
}

/// The loader of every command: one pooled instance, the on-disk cache.
fn loader() -> Loader {
    let loader = Policy::loader().pool_size(1);
    match cache_dir() {
        Some(dir) => loader.cache_dir(dir),
        None => loader,
    }
}

/// The `--policy` component, or the embedded reference policy.
fn load(args: &Args) -> anyhow::Result<Policy> {
    let loader = loader();
    Ok(match args.flag("policy") {
        Some(path) => loader
            .file(path)
            .with_context(|| format!("--policy {path}"))?,
        None => loader.reference()?,
    })
}

/// Where compiled components are cached: `$AGENT_RECOVERY_CACHE_DIR` (empty
/// disables the cache), else `$XDG_CACHE_HOME/agent-recovery`, else
/// `$HOME/.cache/agent-recovery`.
fn cache_dir() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = std::env::var_os("AGENT_RECOVERY_CACHE_DIR") {
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
    var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .map(|dir| dir.join("agent-recovery"))
}

/// The FILE (or stdin) input, capped at the policy's input limit.
fn read(args: &Args, policy: &Policy) -> anyhow::Result<input::Input> {
    let max = policy.limits().max_input_bytes();
    input::read(args.positionals.first().map(String::as_str), max)
}

/// Writes `text` and a newline to `path` (what `print` would have printed).
fn write_file(path: &str, text: &str) -> anyhow::Result<()> {
    let body = format!("{}\n", text.strip_suffix('\n').unwrap_or(text));
    std::fs::write(path, body).map_err(|e| {
        Usage(format!(
            "cannot write {path}: {e}; check that the directory exists"
        ))
        .into()
    })
}

/// Prints `text` and a newline; a closed stdout (e.g. `| head`) is not an error.
fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write to stdout"))
        }
        _ => Ok(()),
    }
}
