//! A real three-node Redis Cluster for a test: `tests/store/redis_cluster.py`
//! (shared with the Node and Python suites) started as a child process; it
//! prints the ports when the cluster is ready, moves slots on command, and
//! stops the servers when its stdin closes (on drop).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

/// A running cluster of three primaries on 127.0.0.1.
pub struct RedisCluster {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// The nodes' ports.
    pub ports: Vec<u16>,
}

impl RedisCluster {
    /// Starts one (the fixture waits for `cluster_state:ok` on every node).
    pub fn start() -> Self {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/store/redis_cluster.py");
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run python3 tests/store/redis_cluster.py ({e}); install python3")
            });
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut c = RedisCluster {
            child,
            stdin,
            stdout,
            ports: Vec::new(),
        };
        let ready = c.line();
        c.ports = ready["ports"]
            .as_array()
            .unwrap_or_else(|| panic!("the cluster fixture said {ready}"))
            .iter()
            .map(|p| u16::try_from(p.as_u64().expect("port")).expect("port"))
            .collect();
        c
    }

    fn line(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the fixture");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the cluster fixture said {line:?} ({e})"))
    }

    fn ask(&mut self, command: &str) -> Value {
        let stdin = self.stdin.as_mut().expect("fixture stdin");
        writeln!(stdin, "{command}").expect("write the fixture");
        stdin.flush().expect("flush");
        self.line()
    }

    /// `redis+cluster://` naming two of the three nodes, plus `query`.
    pub fn url(&self, query: &str) -> String {
        format!(
            "redis+cluster://127.0.0.1:{},127.0.0.1:{}{query}",
            self.ports[0], self.ports[1]
        )
    }

    /// Starts moving every slot that holds a key to the next node, half of
    /// each slot's keys moved (so both ASK and plain answers happen).
    pub fn begin_migration(&mut self) -> Value {
        self.ask("begin-all")
    }

    /// Moves the rest and assigns the slots to their new nodes (MOVED after).
    pub fn finish_migration(&mut self) -> Value {
        self.ask("finish")
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        drop(self.stdin.take()); // the fixture stops the servers at EOF
        let _ = self.child.wait();
    }
}
