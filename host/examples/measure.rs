//! Figures for the hot-swap and sandbox docs, printed as a Markdown table:
//!
//! - how long a candidate takes to validate and activate (compile + verify);
//! - with the watcher, how long from "new file renamed into place" to "active",
//!   for several poll intervals;
//! - what the CPU limit costs per `decide_json` call: fuel metering on, off,
//!   and epoch interruption instead (same component, same bindings);
//! - what the output-shape check costs per call;
//! - how long a runaway component (tests/hostile/spin) runs before the
//!   default limits stop it, for a small and a 1 MB input.
//!
//! Run: `cargo run --release -p agent-recovery --example measure` (about a
//! minute). Figures are medians of several runs on this machine; they are
//! printed, never asserted.

use std::error::Error;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_recovery::{Event, Limits, Policy, PolicyHandle, SwapOptions, WatchOptions};
use serde::de::IgnoredAny;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

wasmtime::component::bindgen!({ world: "recovery-policy", path: "../wit/agent-recovery@0.1.0" });

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Observations of the criterion bench's mix (provider bodies, RPC, transport).
const MIX: &[&str] = &[
    r#"{"source":"http","status":429,"provider":"openai","headers":{"x-ratelimit-remaining-tokens":"0","x-ratelimit-reset-tokens":"1.5s"},"body":{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM).","type":"tokens","param":null,"code":"rate_limit_exceeded"}}}"#,
    r#"{"source":"http","status":529,"body":{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}}"#,
    r#"{"source":"mcp","message":{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"Error calling tool 'fetch_data': connection refused"}],"isError":true}}}"#,
    r#"{"source":"a2a","message":{"jsonrpc":"2.0","id":3,"result":{"id":"task-abc-123","contextId":"ctx-1","status":{"state":"failed"},"kind":"task"}}}"#,
    r#"{"source":"network","code":"ECONNRESET","message":"socket hang up"}"#,
    r#"{"source":"timeout","phase":"read","after_ms":5000}"#,
];
const CONTEXT: &str = r#"{"attempt":1,"elapsed_ms":1500,"seed":42}"#;

fn main() -> Result<()> {
    let payments = std::fs::read(env!("AGENT_RECOVERY_PAYMENTS_WASM"))?;
    println!("| what | figure | how |");
    println!("|---|---|---|");
    activation(&payments)?;
    watcher(&payments)?;
    cpu_limits()?;
    output_check()?;
    runaway()?;
    Ok(())
}

fn row(what: &str, figure: String, how: &str) {
    println!("| {what} | {figure} | {how} |");
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs.get(xs.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Validate + activate: cold (compile), preloaded (verify only), cached.
fn activation(payments: &[u8]) -> Result<()> {
    let handle = PolicyHandle::builder().reference()?;
    let options = SwapOptions::default();
    let mut cold = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        handle.swap_bytes(payments, &options)?;
        cold.push(t.elapsed());
    }
    row(
        "validate + activate a candidate (payments-policy, 0.8 MB), compiling",
        ms(median(cold)),
        "`swap_bytes`: sha256, Cranelift compile, link, world + imports, `verify()` (info + 4 smoke cases)",
    );
    let cache = std::env::temp_dir().join(format!("agent-recovery-measure-{}", std::process::id()));
    let cached = PolicyHandle::builder()
        .loader(Policy::loader().cache_dir(&cache))
        .reference()?;
    cached.swap_bytes(payments, &options)?; // fills the cache
    let mut warm = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        cached.swap_bytes(payments, &options)?;
        warm.push(t.elapsed());
    }
    let _ = std::fs::remove_dir_all(&cache);
    row(
        "validate + activate, compiled component cached on disk",
        ms(median(warm)),
        "`Loader::cache_dir`: deserialize instead of compile",
    );
    let loaded = Arc::new(Policy::from_bytes(payments)?);
    let mut verify = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        handle.swap_policy(Arc::clone(&loaded), &options)?;
        verify.push(t.elapsed());
    }
    row(
        "validate + activate an already loaded policy",
        ms(median(verify)),
        "`swap_policy`: verify only (a switch back to a known version)",
    );
    Ok(())
}

/// From "new file renamed into place" to "active", per poll interval.
fn watcher(payments: &[u8]) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("agent-recovery-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("policy.wasm");
    let reference = Policy::reference_bytes();
    std::fs::write(&path, reference)?;
    let cache = dir.join("cache");
    for interval_ms in [50, 250, 500] {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let handle = PolicyHandle::builder()
            .loader(Policy::loader().cache_dir(&cache))
            .on_event(move |e| {
                if let (Event::Swapped { .. }, Ok(tx)) = (e, tx.lock()) {
                    let _ = tx.send(Instant::now());
                }
            })
            .file(&path, &SwapOptions::default())?;
        let options = WatchOptions::default().interval(Duration::from_millis(interval_ms))?;
        let watcher = handle.watch(&path, options)?;
        let mut latencies = Vec::new();
        for i in 0..6 {
            let bytes = if i % 2 == 0 { payments } else { reference };
            let tmp = dir.join("policy.tmp");
            std::fs::write(&tmp, bytes)?;
            let written = Instant::now();
            std::fs::rename(&tmp, &path)?;
            let active = rx.recv_timeout(Duration::from_secs(60))?;
            latencies.push(active.duration_since(written));
        }
        watcher.stop();
        row(
            &format!("watcher: file renamed into place -> active, poll every {interval_ms} ms"),
            ms(median(latencies)),
            "compiled component cached; detection takes 1-2 polls, then validate + activate",
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The store data for the raw engines below: an empty WASI context.
struct Data {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Data {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum CpuLimit {
    Fuel,
    Off,
    Epoch,
}

/// The reference on an engine of its own, through bindings generated here:
/// with fuel metering, with nothing, or with epoch interruption.
struct Raw {
    limit: CpuLimit,
    store: Store<Data>,
    policy: RecoveryPolicy,
    ticker: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Raw {
    fn new(limit: CpuLimit) -> Result<Raw> {
        let mut config = Config::new();
        config.consume_fuel(limit == CpuLimit::Fuel);
        config.epoch_interruption(limit == CpuLimit::Epoch);
        let engine = Engine::new(&config)?;
        let component = Component::from_binary(&engine, Policy::reference_bytes())?;
        let mut linker = Linker::<Data>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        let data = Data {
            wasi: WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
        };
        let mut store = Store::new(&engine, data);
        let ticker = (limit == CpuLimit::Epoch).then(|| {
            let engine = engine.clone();
            let (stop, stopped) = mpsc::channel::<()>();
            let thread = std::thread::spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(Duration::from_millis(10))
                {
                    engine.increment_epoch();
                }
            });
            (stop, thread)
        });
        refill(limit, &mut store)?;
        let policy = RecoveryPolicy::instantiate(&mut store, &component, &linker)?;
        Ok(Raw {
            limit,
            store,
            policy,
            ticker,
        })
    }

    /// Time per `decide_json` call over `calls` calls of the mix.
    fn batch(&mut self, calls: usize) -> Result<Duration> {
        let t = Instant::now();
        for i in 0..calls {
            refill(self.limit, &mut self.store)?;
            let out = self.policy.agent_recovery_decide().call_decide_json(
                &mut self.store,
                MIX[i % MIX.len()],
                CONTEXT,
            )?;
            std::hint::black_box(out.map_err(|e| e.message)?);
        }
        Ok(t.elapsed() / calls as u32)
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.ticker.take() {
            drop(stop);
            let _ = thread.join();
        }
    }
}

/// What the host does before each call: fuel, or a fresh epoch deadline.
fn refill(limit: CpuLimit, store: &mut Store<Data>) -> Result<()> {
    match limit {
        CpuLimit::Fuel => store.set_fuel(100_000_000)?,
        CpuLimit::Epoch => store.set_epoch_deadline(100),
        CpuLimit::Off => {}
    }
    Ok(())
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// Per-call cost under each CPU limit. The configurations run in turns,
/// round after round, and the median round counts, so a burst of load on
/// the machine hits all of them alike.
fn cpu_limits() -> Result<()> {
    let mut raws = [
        Raw::new(CpuLimit::Off)?,
        Raw::new(CpuLimit::Fuel)?,
        Raw::new(CpuLimit::Epoch)?,
    ];
    let host = Policy::reference()?;
    let mut times: [Vec<Duration>; 4] = Default::default();
    for round in 0..21 {
        for (raw, times) in raws.iter_mut().zip(times.iter_mut()) {
            let per_call = raw.batch(600)?;
            if round > 0 {
                times.push(per_call);
            }
        }
        let t = Instant::now();
        for i in 0..600 {
            std::hint::black_box(host.decide_json(MIX[i % MIX.len()], CONTEXT)?);
        }
        if round > 0 {
            times[3].push(t.elapsed() / 600);
        }
    }
    let [off, fuel, epoch, host] = times.map(median);
    let pct = |d: Duration| (d.as_secs_f64() / off.as_secs_f64() - 1.0) * 100.0;
    row(
        "`decide_json` per call, no CPU limit",
        us(off),
        "`consume_fuel(false)`; bindings generated in the example, one instance, mix of 6 observations",
    );
    row(
        "`decide_json` per call, fuel metering (the host's setting)",
        format!("{} ({:+.0}%)", us(fuel), pct(fuel)),
        "`consume_fuel(true)`, refuelled before each call",
    );
    row(
        "`decide_json` per call, epoch interruption instead",
        format!("{} ({:+.0}%)", us(epoch), pct(epoch)),
        "`epoch_interruption(true)`, a 10 ms ticker thread, deadline reset before each call",
    );
    row(
        "`Policy::decide_json` per call, the host as shipped",
        format!("{} ({:+.0}%)", us(host), pct(host)),
        "fuel, pooled instance, limiter reset, output-shape check",
    );
    Ok(())
}

fn output_check() -> Result<()> {
    let policy = Policy::reference()?;
    let decisions: Vec<String> = MIX
        .iter()
        .map(|obs| policy.decide_json(obs, CONTEXT))
        .collect::<std::result::Result<_, _>>()?;
    let time = |f: &dyn Fn(&str) -> bool| {
        let calls = 6_000;
        let t = Instant::now();
        for i in 0..calls {
            std::hint::black_box(f(&decisions[i % decisions.len()]));
        }
        t.elapsed() / calls as u32
    };
    let (mut shapes, mut anys) = (Vec::new(), Vec::new());
    for _ in 0..21 {
        shapes.push(time(&|d| agent_recovery::check_decision_json(d).is_ok()));
        anys.push(time(&|d| serde_json::from_str::<IgnoredAny>(d).is_ok()));
    }
    let (shape, any) = (median(shapes), median(anys));
    let avg = decisions.iter().map(String::len).sum::<usize>() / decisions.len();
    row(
        "output-shape check of a decision (required members, key types)",
        format!("{:.2} µs", shape.as_secs_f64() * 1e6),
        &format!(
            "one byte scan, serde when it is unsure; average decision {avg} bytes; plain serde `IgnoredAny` parse: {:.2} µs",
            any.as_secs_f64() * 1e6
        ),
    );
    Ok(())
}

/// How long tests/hostile/spin runs before the default limits stop it.
fn runaway() -> Result<()> {
    let spin = Policy::from_file(env!("AGENT_RECOVERY_HOSTILE_SPIN_WASM"))?;
    let limits = Limits::default();
    let small = r#"{"source":"http","status":503}"#;
    let body = "x".repeat(1 << 20);
    let big = format!(r#"{{"source":"http","status":500,"body":"{body}"}}"#);
    for (what, obs) in [("small (30 B) input", small), ("1 MB input", big.as_str())] {
        let mut runs = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let err = match spin.decide_json(obs, "{}") {
                Ok(_) => return Err("the spin fixture answered".into()),
                Err(e) => e,
            };
            runs.push(t.elapsed());
            if err.kind() != agent_recovery::ErrorKind::OutOfFuel {
                return Err(format!("expected out of fuel, got {err}").into());
            }
        }
        let fuel = limits.fuel_for(obs.len() + 2);
        row(
            &format!("runaway (spin) stopped, {what}"),
            ms(median(runs)),
            &format!("default limits: {fuel} fuel units, then `out-of-fuel`"),
        );
    }
    Ok(())
}
