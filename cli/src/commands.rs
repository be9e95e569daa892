//! The subcommands.

use std::io::Write;
use std::path::PathBuf;

use agent_recovery::{Loader, Policy};
use anyhow::Context as _;
use serde_json::json;

use crate::args::{self, Cli, Command, Global};
use crate::style::Output;
use crate::{
    Usage, context, dlq, document, human, input, policy_test, precompiled, render, replay, serve,
    signing, simulate,
};

/// Runs the parsed command line.
pub fn dispatch(cli: Cli) -> anyhow::Result<()> {
    let Some(command) = cli.command else {
        return print(args::command().render_help().to_string().trim_end());
    };
    let g = &cli.global;
    match command {
        Command::Classify(a) => classify(g, a),
        Command::Decide(a) => decide(g, a),
        Command::Walkthrough(a) => walkthrough(g, a),
        Command::Backoff(a) => backoff(g, a),
        Command::Key(a) => key(g, a),
        Command::Registry(a) => registry(g, a),
        Command::ErrorsBlock(a) => errors_block(g, a),
        Command::Schema(a) => schema(g, a),
        Command::Render(a) => render(g, a),
        Command::Check(a) => check(g, a),
        Command::Serve(a) => serve::serve(g, a, loader()),
        Command::Simulate(a) => print(&simulate::run(simulate::SimulateOptions {
            scenario: a.scenario,
            json: !Output::new(g).human,
            store: a.store.map(PathBuf::from),
            policy: g.policy.as_ref().map(PathBuf::from),
            trusted: signing::required_keys(g)?,
            loader: loader(),
            trace_out: a.trace_out.map(PathBuf::from),
        })?),
        Command::Recover(a) => dlq::recover(g, a, loader()),
        Command::Dlq(a) => dlq::dlq(g, a, loader()),
        Command::Policy(args::PolicyCommand::Pack(a)) => document::pack(g, a),
        Command::Policy(args::PolicyCommand::Replay(a)) => replay::run(g, a, load(g)?),
        Command::Policy(args::PolicyCommand::Keygen(a)) => signing::keygen(a),
        Command::Policy(args::PolicyCommand::Sign(a)) => signing::sign(a),
        Command::Policy(args::PolicyCommand::Verify(a)) => signing::verify(g, a),
        Command::Test(a) => policy_test::run(g, a, load(g)?),
        Command::Precompile(a) => precompiled::run(a),
        Command::Version => print(args::VERSION),
    }
}

fn classify(g: &Global, a: args::Input) -> anyhow::Result<()> {
    let policy = load(g)?;
    let obs = read(a.file.as_deref(), &policy)?;
    let envelope = policy.classify_json(&obs.text).context(obs.name)?;
    let out = Output::new(g);
    match out
        .human
        .then(|| human::envelope(&envelope, out.paint))
        .flatten()
    {
        Some(summary) => print(&summary),
        None => print(&envelope),
    }
}

fn decide(g: &Global, a: args::Decide) -> anyhow::Result<()> {
    let config = input::config(g.config.as_deref())?;
    let policy = load(g)?;
    let obs = read(a.file.as_deref(), &policy)?;
    let ctx = context::decide_context(&a.context, &obs.text, config)?;
    let decision = policy.decide_json(&obs.text, &ctx).context(obs.name)?;
    let out = Output::new(g);
    match out
        .human
        .then(|| human::decision(&decision, out.paint))
        .flatten()
    {
        Some(summary) => print(&summary),
        None => print(&decision),
    }
}

/// `walkthrough [DIR]`: `decide` for every `*.json` in DIR (name order).
///
/// Human: each file's summary, then one table. JSON: one line per file,
/// `{"file":"<name>","decision":<the policy's decision JSON>}`.
fn walkthrough(g: &Global, a: args::Walkthrough) -> anyhow::Result<()> {
    let config = input::config(g.config.as_deref())?;
    let policy = load(g)?;
    let entries = std::fs::read_dir(&a.dir).map_err(|e| {
        Usage(format!(
            "cannot read directory {}: {e}; pass the directory of observation files",
            a.dir
        ))
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Usage(format!(
            "{} has no *.json observation files; pass a directory that has some",
            a.dir
        ))
        .into());
    }
    let out = Output::new(g);
    let mut rows = Vec::new();
    for path in &files {
        let shown = path.display().to_string();
        let name = path
            .file_name()
            .map_or_else(|| shown.clone(), |n| n.to_string_lossy().into_owned());
        let obs = read(Some(&shown), &policy)?;
        let ctx = context::decide_context(&a.context, &obs.text, config.clone())?;
        let decision = policy.decide_json(&obs.text, &ctx).context(obs.name)?;
        let summary = out.human.then(|| human::decision(&decision, out.paint));
        match (summary.flatten(), human::Row::new(&name, &decision)) {
            (Some(summary), Some(row)) => {
                print(&format!(
                    "{}\n{summary}\n",
                    out.paint.dim(&format!("== {shown}"))
                ))?;
                rows.push(row);
            }
            _ => print(&format!(
                "{{\"file\":{},\"decision\":{decision}}}",
                serde_json::Value::from(name)
            ))?,
        }
    }
    if out.human && !rows.is_empty() {
        print(&human::table(&rows, out.paint))?;
    }
    Ok(())
}

fn backoff(g: &Global, a: args::Backoff) -> anyhow::Result<()> {
    let config = match (g.config.as_deref(), input::config(g.config.as_deref())?) {
        (Some(path), Some(map)) => Some(context::policy_config(path, map)?),
        _ => None,
    };
    let policy = load(g)?;
    let delay = policy.backoff(context::call_kind(a.call), a.attempt, a.seed, config)?;
    print(&json!({ "delay_ms": delay }).to_string())
}

fn key(g: &Global, a: args::Key) -> anyhow::Result<()> {
    let policy = load(g)?;
    let key = policy
        .key(&a.run_id, &a.step_id, &a.tool, &a.args)
        .context("--args")?;
    print(&json!({ "key": key }).to_string())
}

fn registry(g: &Global, a: args::Registry) -> anyhow::Result<()> {
    let policy = load(g)?;
    let text = match a.format {
        args::RegistryFormat::Json => policy.registry_json()?,
        args::RegistryFormat::Markdown => policy.registry_markdown()?,
    };
    match a.output {
        Some(path) => write_file(&path, &text),
        None => print(text.strip_suffix('\n').unwrap_or(&text)),
    }
}

fn errors_block(g: &Global, a: args::ErrorsBlock) -> anyhow::Result<()> {
    let policy = load(g)?;
    let block = policy.errors_block(&a.prefixes)?;
    print(block.strip_suffix('\n').unwrap_or(&block))
}

fn schema(g: &Global, a: args::Schema) -> anyhow::Result<()> {
    let policy = load(g)?;
    match policy.json_schema(&a.name)? {
        Some(schema) => print(&schema),
        None => Err(Usage(format!(
            "unknown schema '{}': expected envelope, decision or code-info",
            a.name
        ))
        .into()),
    }
}

fn render(g: &Global, a: args::Render) -> anyhow::Result<()> {
    let format = render::format(&a.format)?;
    let policy = load(g)?;
    let input = read(a.file.as_deref(), &policy)?;
    let options = a.options.as_deref().unwrap_or("");
    print(&render::render(format, options, &policy, &input)?)
}

fn check(g: &Global, a: args::Check) -> anyhow::Result<()> {
    let path = a.wasm;
    let bytes = signing::read_policy(g, &path)?;
    let policy = loader().bytes(&bytes).context(path.clone())?;
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

/// The loader of every command: one pooled instance, the reference
/// precompiled into the installation, the on-disk cache.
fn loader() -> Loader {
    let loader = precompiled::dirs()
        .into_iter()
        .fold(Policy::loader().pool_size(1), Loader::precompiled_dir);
    match cache_dir() {
        Some(dir) => loader.cache_dir(dir),
        None => loader,
    }
}

/// The `--policy` component, or the embedded reference policy. With
/// --require-signature, the file is loaded only when its signature holds
/// (the embedded reference ships with the program and needs none).
pub(crate) fn load(g: &Global) -> anyhow::Result<Policy> {
    let loader = loader();
    Ok(match g.policy.as_deref() {
        Some(path) if document::is_document(path) => document::load(g, loader, path)?,
        Some(path) => {
            let bytes = signing::read_policy(g, path)?;
            loader
                .bytes(&bytes)
                .with_context(|| format!("--policy {path}"))?
        }
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
fn read(file: Option<&str>, policy: &Policy) -> anyhow::Result<input::Input> {
    let max = policy.limits().max_input_bytes();
    input::read(file, max)
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
pub(crate) fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write to stdout"))
        }
        _ => Ok(()),
    }
}
