//! A real `redis-server` for a test: started on a free port of 127.0.0.1
//! with persistence off, stopped (SIGKILL) when dropped. Fails with a hint
//! when `redis-server` is not installed (scripts/test-all.sh installs it).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`.
pub struct RedisServer {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

fn pong(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

impl RedisServer {
    /// Starts one on a free port.
    pub fn start() -> Self {
        Self::start_on(free_port())
    }

    /// Starts one on `port` (a restart after [`kill`](Self::kill)).
    pub fn start_on(port: u16) -> Self {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start redis-server ({e}); install it: apt-get update && apt-get install -y redis-server (scripts/test-all.sh does)"
                )
            });
        let server = RedisServer {
            child: Some(child),
            port,
        };
        // Readiness, not timing: poll PING for up to 10 s.
        let start = Instant::now();
        while !pong(port) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "redis-server on port {port} did not answer PING within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// `redis://127.0.0.1:PORT/0` plus `query` (e.g. `?prefix=t1`).
    pub fn url(&self, query: &str) -> String {
        format!("redis://127.0.0.1:{}/0{query}", self.port)
    }

    /// Sends `signal` (`STOP`, `CONT`) to the server with kill(1).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("redis-server is running").id();
        let status = Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .expect("run kill(1)");
        assert!(status.success(), "kill -{signal} {pid} failed");
    }

    /// SIGKILLs the server and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

mod cluster;
#[allow(unused_imports)] // not every test target that includes this module starts a cluster
pub use cluster::RedisCluster;
