//! A plain HTTP/1.1 server on 127.0.0.1 that answers a script of statuses
//! (one per request, the last one repeated) and records each request's
//! `Idempotency-Key`, and a client that sends one GET over a new connection.

#![allow(dead_code, reason = "each test module uses a different part")]

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The server's address and what it has seen.
pub struct Server {
    pub addr: std::net::SocketAddr,
    /// The `Idempotency-Key` header of each request, in order ("" when absent).
    pub keys: Arc<Mutex<Vec<String>>>,
}

/// Starts the server on the current tokio runtime.
pub async fn serve(statuses: Vec<u16>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    let keys = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&keys);
    tokio::spawn(async move {
        let mut n = 0;
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let head = read_head(&mut socket).await;
            let key = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("idempotency-key")
                        .then(|| value.trim().to_owned())
                })
                .unwrap_or_default();
            seen.lock().unwrap().push(key);
            let status = statuses[n.min(statuses.len() - 1)];
            n += 1;
            let body = format!("{{\"status\":{status}}}");
            let reply = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(reply.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    Server { addr, keys }
}

async fn read_head(socket: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// A response: its status and body.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

/// GET / with `key` as the `Idempotency-Key`.
pub async fn get(addr: std::net::SocketAddr, key: &str) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!(
        "GET / HTTP/1.1\r\nhost: {addr}\r\nidempotency-key: {key}\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await?;
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line in {text:?}")))?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok(Response { status, body })
}
