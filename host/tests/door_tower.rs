//! `door::RecoverLayer`: a real `tower` stack whose inner service is an
//! HTTP client of a real server on 127.0.0.1, on a real tokio runtime. Each
//! request is one step; the expectations are those of `host/tests/door.rs`
//! (a 503 is retried with the same key, a 400 is not).

#[path = "door_http/mod.rs"]
mod door_http;

use std::sync::Arc;

use agent_recovery::door::{Door, DoorError, RecoverLayer};
use agent_recovery::runtime::{Call, Clock, VirtualClock};
use serde_json::json;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

use door_http::{Response, get, serve};

const T0: u64 = 1_767_225_600_000;

/// The request of the client service: where to send it, and its key.
#[derive(Clone, Debug)]
struct Get {
    addr: std::net::SocketAddr,
    key: String,
}

fn layer(clock: &Arc<VirtualClock>) -> RecoverLayer<Get, Response, std::io::Error> {
    let door = Door::builder()
        .clock(clock.clone())
        .seed(7)
        .call("tool")
        .tool("search.get")
        .build()
        .unwrap();
    RecoverLayer::new(door)
        .args(|req: &Get| json!({"addr": req.addr.to_string()}))
        .prepare(|req: &mut Get, call: &Call| req.key = call.key.clone())
        .check(|res: &Response| Some(json!({"source": "http", "status": res.status}).to_string()))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

#[test]
fn each_request_is_a_step_retried_with_one_key() {
    let clock = Arc::new(VirtualClock::new(T0));
    let layer = layer(&clock);
    runtime().block_on(async {
        let server = serve(vec![503, 503, 200]).await;
        let mut client =
            ServiceBuilder::new()
                .layer(layer)
                .service(service_fn(|req: Get| async move {
                    get(req.addr, &req.key).await
                }));
        let req = Get {
            addr: server.addr,
            key: String::new(),
        };
        let res = client.ready().await.unwrap().call(req).await.unwrap();
        assert_eq!(res.status, 200);
        let keys = server.keys.lock().unwrap().clone();
        assert_eq!(keys.len(), 3, "{keys:?}");
        assert!(
            keys.iter().all(|k| k.len() == 64 && *k == keys[0]),
            "{keys:?}"
        );
    });
    assert!(clock.now_ms() > T0, "slept on the door's clock");
}

#[test]
fn a_permanent_failure_is_not_retried_and_keeps_the_envelope_for_the_model() {
    let clock = Arc::new(VirtualClock::new(T0));
    let layer = layer(&clock);
    runtime().block_on(async {
        let server = serve(vec![400, 200]).await;
        let client =
            ServiceBuilder::new()
                .layer(layer)
                .service(service_fn(|req: Get| async move {
                    get(req.addr, &req.key).await
                }));
        let req = Get {
            addr: server.addr,
            key: String::new(),
        };
        let err = client.oneshot(req).await.unwrap_err();
        assert!(
            matches!(err, DoorError::Stopped { ref outcome, .. } if outcome == "failed"),
            "{err}"
        );
        assert_eq!(err.code(), "tool.http.400_bad_request");
        assert_eq!(
            err.for_model().unwrap()["error"]["code"],
            "tool.http.400_bad_request"
        );
        assert_eq!(server.keys.lock().unwrap().len(), 1);
    });
}
