//! A real `redis-server` for a test: started on a free port of 127.0.0.1
//! with persistence off, stopped (SIGKILL) when dropped. Fails with a hint
//! when `redis-server` is not installed (scripts/test-all.sh installs it).
//! It is ready once the server on the port says it is this process (`INFO
//! server`), so another server on the port is never taken for ours; a port
//! picked here and taken before the server binds it is given up for a fresh
//! one (at most 5 starts).

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

/// The process id of the Redis server answering on `port` (`INFO server`),
/// or `None` when none answers there.
fn server_pid(port: u16) -> Option<u32> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(b"INFO server\r\n").ok()?;
    let mut data = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
            if data.first() != Some(&b'$') {
                return None; // not a bulk reply: an error (still loading), or not Redis
            }
            let size: usize = std::str::from_utf8(data.get(1..eol)?).ok()?.parse().ok()?;
            if data.len() >= eol + 2 + size {
                let body = String::from_utf8_lossy(&data[eol + 2..eol + 2 + size]);
                return body
                    .lines()
                    .find_map(|l| l.strip_prefix("process_id:"))
                    .and_then(|pid| pid.trim().parse().ok());
            }
        }
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&chunk[..n]);
    }
}

impl RedisServer {
    /// Starts one on a free port.
    pub fn start() -> Self {
        let mut port = free_port();
        let mut attempt = 1;
        loop {
            if let Some(server) = Self::launch(port) {
                return server;
            }
            assert!(
                attempt < 5,
                "redis-server could not listen on a free port (5 starts, the last on {port})"
            );
            attempt += 1;
            port = free_port();
        }
    }

    /// Starts one on `port` (a restart after [`kill`](Self::kill)).
    pub fn start_on(port: u16) -> Self {
        Self::launch(port).unwrap_or_else(|| panic!("redis-server could not listen on port {port}"))
    }

    /// Starts one on `port`: `None` when it exited or another server has the port.
    fn launch(port: u16) -> Option<Self> {
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
        let mut server = RedisServer {
            child: Some(child),
            port,
        };
        // Readiness, not timing: poll for up to 10 s.
        let start = Instant::now();
        loop {
            let child = server.child.as_mut().expect("just started");
            if child.try_wait().ok().flatten().is_some() {
                server.child = None;
                return None;
            }
            match server_pid(port) {
                Some(pid) if pid == child.id() => return Some(server),
                Some(_) => return None, // another server has the port; dropping ours kills it
                None => {}
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "redis-server on port {port} did not answer within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
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
