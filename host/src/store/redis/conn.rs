//! The connection under a [`RedisStore`](super::RedisStore): one server, or
//! a Redis Cluster through the `redis` crate's cluster client (which follows
//! `MOVED` and `ASK` and retries `TRYAGAIN` while a slot migrates).

use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterConnection};
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Connection, ConnectionLike, RedisError, RedisResult, Value};

/// How many redirects and retries one cluster command may take.
const CLUSTER_RETRIES: u32 = 12;

/// The client of a store URL.
pub(crate) enum Client {
    /// `redis://`: one server.
    One(redis::Client),
    /// `redis+cluster://`: the seed nodes of a cluster.
    Cluster(ClusterClient),
}

/// An open connection.
pub(crate) enum Conn {
    One(Connection),
    Cluster(Box<ClusterConnection>),
}

impl Client {
    /// The client for one server or a cluster's seed nodes (`redis://` URLs).
    pub(crate) fn new(nodes: &[String], cluster: bool, timeout: Duration) -> RedisResult<Self> {
        if !cluster {
            return Ok(Client::One(redis::Client::open(
                nodes.first().map_or("redis://127.0.0.1", String::as_str),
            )?));
        }
        let client = ClusterClient::builder(nodes.iter().map(String::as_str))
            .retries(CLUSTER_RETRIES)
            // Waits between retries of TRYAGAIN / CLUSTERDOWN: 10 ms doubling,
            // at most a quarter of the command timeout.
            .min_retry_wait(5)
            .max_retry_wait(u64::try_from(timeout.as_millis() / 4).unwrap_or(250).max(6))
            .retry_wait_formula(10, 2)
            .build()?;
        Ok(Client::Cluster(client))
    }

    /// Connects within `connect`; every command then answers within `timeout`.
    pub(crate) fn connect(&self, connect: Duration, timeout: Duration) -> RedisResult<Conn> {
        match self {
            Client::One(c) => {
                let conn = c.get_connection_with_timeout(connect)?;
                conn.set_read_timeout(Some(timeout))?;
                conn.set_write_timeout(Some(timeout))?;
                Ok(Conn::One(conn))
            }
            Client::Cluster(c) => {
                let config = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(connect)
                    .set_response_timeout(timeout);
                let conn = c.get_connection_with_config(config)?;
                conn.set_read_timeout(Some(timeout))?;
                conn.set_write_timeout(Some(timeout))?;
                Ok(Conn::Cluster(Box::new(conn)))
            }
        }
    }
}

impl Conn {
    /// The connection as the `redis` crate's command target.
    pub(crate) fn like(&mut self) -> &mut dyn ConnectionLike {
        match self {
            Conn::One(c) => c,
            Conn::Cluster(c) => c.as_mut(),
        }
    }

    /// Whether this is a cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// Whether the connection is still usable.
    pub(crate) fn is_open(&self) -> bool {
        match self {
            Conn::One(c) => c.is_open(),
            Conn::Cluster(c) => c.is_open(),
        }
    }

    /// Every key matching `pattern`, by `SCAN` on the server or on every
    /// primary of the cluster (from `CLUSTER SLOTS`).
    pub(crate) fn scan(&mut self, pattern: &str) -> RedisResult<Vec<String>> {
        let mut out = Vec::new();
        match self {
            Conn::One(c) => scan_node(pattern, &mut out, |cmd| cmd.query(c))?,
            Conn::Cluster(c) => {
                for (host, port) in primaries(c)? {
                    let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                        host: host.clone(),
                        port,
                    });
                    scan_node(pattern, &mut out, |cmd| {
                        let v = c.route_command(cmd, route.clone())?;
                        redis::from_redis_value(v).map_err(RedisError::from)
                    })?;
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

fn scan_node(
    pattern: &str,
    out: &mut Vec<String>,
    mut query: impl FnMut(&redis::Cmd) -> RedisResult<(u64, Vec<String>)>,
) -> RedisResult<()> {
    let mut cursor = 0u64;
    loop {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000);
        let (next, keys) = query(&cmd)?;
        out.extend(keys);
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

/// The primaries that own slots, from `CLUSTER SLOTS`
/// (`[[start, end, [host, port, id, ..], replicas..], ..]`).
fn primaries(c: &mut ClusterConnection) -> RedisResult<Vec<(String, u16)>> {
    let reply: Value = redis::cmd("CLUSTER").arg("SLOTS").query(c)?;
    let mut out: Vec<(String, u16)> = Vec::new();
    if let Value::Array(ranges) = reply {
        for range in ranges {
            let Value::Array(parts) = range else { continue };
            let Some(Value::Array(node)) = parts.get(2) else {
                continue;
            };
            let host: Option<String> = node
                .first()
                .and_then(|v| redis::from_redis_value(v.clone()).ok());
            let port: Option<u16> = node
                .get(1)
                .and_then(|v| redis::from_redis_value(v.clone()).ok());
            if let (Some(h), Some(p)) = (host, port)
                && !out.contains(&(h.clone(), p))
            {
                out.push((h, p));
            }
        }
    }
    Ok(out)
}
