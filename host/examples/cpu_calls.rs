//! Instructions per `decide_json` under each CPU limit, for callgrind: the
//! bench's 13-observation mix through bindings generated here, on an engine
//! with fuel metering (what the host ships), with no limit, or with epoch
//! interruption (a deadline per call) instead:
//!
//! ```text
//! cargo build --release -p agent-recovery --example cpu_calls
//! valgrind --tool=callgrind target/release/examples/cpu_calls fuel|off|epoch COMPONENT.wasm 0
//! valgrind --tool=callgrind target/release/examples/cpu_calls fuel|off|epoch COMPONENT.wasm 200
//! ```
//!
//! (total at 200 - total at 0) / (200 x 13) is one call, without the host's
//! pool and output check. The first run of each limit compiles the component
//! and writes `COMPONENT.wasm.<limit>.cwasm` beside it; run N = 0 twice.

use std::error::Error;

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

wasmtime::component::bindgen!({ world: "recovery-policy", path: "../wit/agent-recovery@0.1.0" });

// The 13-observation mix every decide_json benchmark uses.
include!("../../tests/bench/mix.rs");

const CONTEXT: &str = r#"{"attempt":1,"elapsed_ms":1500,"seed":42}"#;

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

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(limit), Some(wasm), Some(n)) = (args.next(), args.next(), args.next()) else {
        return Err("usage: cpu_calls fuel|off|epoch COMPONENT.wasm MIXES".into());
    };
    if !["fuel", "off", "epoch"].contains(&limit.as_str()) {
        return Err(format!("unknown limit {limit:?}: fuel, off or epoch").into());
    }
    let n: usize = n.parse()?;
    let mut config = Config::new();
    config.consume_fuel(limit == "fuel");
    config.epoch_interruption(limit == "epoch");
    let engine = Engine::new(&config)?;
    let compiled = format!("{wasm}.{limit}.cwasm");
    // SAFETY: the file was written by `serialize` below, on this machine.
    let component = match unsafe { Component::deserialize_file(&engine, &compiled) } {
        Ok(component) => component,
        Err(_) => {
            let component = Component::from_binary(&engine, &std::fs::read(&wasm)?)?;
            std::fs::write(&compiled, component.serialize()?)?;
            component
        }
    };
    let mut linker = Linker::<Data>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    let data = Data {
        wasi: WasiCtxBuilder::new().build(),
        table: ResourceTable::new(),
    };
    let mut store = Store::new(&engine, data);
    // What the host does before each call: fuel, or a fresh deadline.
    let refill = |store: &mut Store<Data>| -> wasmtime::Result<()> {
        match limit.as_str() {
            "fuel" => store.set_fuel(100_000_000)?,
            "epoch" => store.set_epoch_deadline(100),
            _ => {}
        }
        Ok(())
    };
    refill(&mut store)?;
    let policy = RecoveryPolicy::instantiate(&mut store, &component, &linker)?;
    // One warm-up mix, counted in both runs.
    for i in 0..(n + 1) * MIX.len() {
        refill(&mut store)?;
        let out = policy.agent_recovery_decide().call_decide_json(
            &mut store,
            std::hint::black_box(MIX[i % MIX.len()]),
            CONTEXT,
        )?;
        std::hint::black_box(out.map_err(|e| e.message)?);
    }
    Ok(())
}
