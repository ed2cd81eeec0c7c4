//! The HTTP API in this process: the router on a `file://` lease in a temp dir, called with
//! `tower::ServiceExt::oneshot` (no socket, no child process). Every route and error path that
//! needs no process of its own; `api.rs` keeps what does (TLS, a faked clock, configuration
//! errors, a down coordinator, a fuzz over real connections), `router_metrics.rs` the metrics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashSet;

use axum::body::Body;
use axum::http::{header, Method};
use clockflake::{Layout, PublicIds};
use common::ids_of;
use common::in_process::{PublicSettings, Service};

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f";
const OLD_KEY_HEX: &str = "f0e0d0c0b0a090807060504030201000";

#[tokio::test]
async fn ids_json_and_text() {
    let server = Service::start("ids", &[], PublicSettings::default()).await;
    let one = server.get("/v1/id").await;
    assert_eq!(one.status, 200);
    assert_eq!(one.headers["content-type"], "application/json");
    let first: u64 = one.json()["id"].as_str().unwrap().parse().unwrap();
    let parts = Layout::CLOCKSEQ.decode(first).unwrap();
    let now = clockflake_lease::wall_ms();
    assert!(
        parts.timestamp_ms.abs_diff(now) < 60_000,
        "{parts:?} at {now}"
    );

    let text = server.get_accepting("/v1/id", "text/plain").await;
    assert_eq!(text.status, 200);
    assert!(text.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let second: u64 = text.body.strip_suffix('\n').unwrap().parse().unwrap();
    assert!(second > first);

    // The documented maximum in one request, strictly increasing after the single ids.
    let many = server.get("/v1/ids?count=100000").await;
    assert_eq!(many.status, 200);
    let ids = ids_of(&many.json());
    assert_eq!(ids.len(), 100_000);
    assert!(ids[0] > second);
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));

    let lines = server
        .get_accepting(
            "/v1/ids?count=5000",
            "application/xml, text/plain;q=0.9, application/json;q=0.5",
        )
        .await;
    assert_eq!(lines.status, 200);
    let text_ids: Vec<u64> = lines.body.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(text_ids.len(), 5000);
    assert!(lines.body.ends_with('\n'));
    assert!(text_ids[0] > ids[ids.len() - 1]);
    assert!(text_ids.windows(2).all(|pair| pair[0] < pair[1]));
    let all: HashSet<u64> = ids.iter().chain(&text_ids).copied().collect();
    assert_eq!(all.len(), 105_000);
}

#[tokio::test]
async fn count_errors() {
    let server = Service::start("count", &["--max-count", "1000"], PublicSettings::default()).await;
    assert_eq!(server.get("/v1/ids?count=1000").await.status, 200);
    let queries = [
        "",
        "?",
        "?count",
        "?count=",
        "?count=0",
        "?count=1001",
        "?count=-1",
        "?count=+1",
        "?count=1.5",
        "?count=1e3",
        "?count=%20%31",
        "?count=0x10",
        "?count=99999999999999999999999999999999999999",
        "?count=18446744073709551616",
        "?count=%FF%FE",
        "?count=%C3%28",
        "?count=%",
        "?count=1&count=2",
        "?Count=1",
    ];
    let paths = queries.map(|query| format!("/v1/ids{query}"));
    server
        .assert_get_errors(paths, 400, "INVALID_ARG_VALUE")
        .await;
    // Unknown parameters are ignored (cache busters).
    assert_eq!(server.get("/v1/ids?count=2&nonce=abc").await.status, 200);
}

#[tokio::test]
async fn decode_route() {
    let server = Service::start(
        "decode",
        &["--layout", "twitter"],
        PublicSettings::default(),
    )
    .await;
    let id = Layout::TWITTER
        .encode(&clockflake::Parts {
            timestamp_ms: 1_704_067_200_000,
            clock_seq: 0,
            worker_id: 513,
            sequence: 7,
        })
        .unwrap();
    let body = server.get(&format!("/v1/decode/{id}")).await.json();
    assert_eq!(body["id"], id.to_string());
    assert_eq!(body["layout"], "twitter");
    assert_eq!(body["timestampMs"], 1_704_067_200_000u64);
    assert_eq!(body["time"], "2024-01-01T00:00:00.000Z");
    assert_eq!(body["workerId"], 513);
    assert_eq!(body["sequence"], 7);
    assert_eq!(body["clockSeq"], 0);

    let other = server
        .get(&format!("/v1/decode/{id}?layout=sonyflake"))
        .await
        .json();
    assert_eq!(other["layout"], "sonyflake");
    let expected = Layout::SONYFLAKE.decode(id).unwrap();
    assert_eq!(other["workerId"], expected.worker_id);

    let reply = server.get("/v1/decode/1?layout=nope").await;
    reply.assert_error(400, "UNKNOWN_LAYOUT");
    let reply = server.get("/v1/decode/1?layout=twitter&layout=js53").await;
    reply.assert_error(400, "INVALID_ARG_VALUE");
    // Malformed: 400. Well-formed (1 to 20 digits, as openapi.json says) but past the
    // layout's range: 422, the same code.
    let malformed = [
        "abc",
        "-1",
        "1.0",
        "%20",
        "99999999999999999999999",
        "%FF%FE",
        "%E2%82%AC",
    ];
    let paths = malformed.map(|id| format!("/v1/decode/{id}"));
    server.assert_get_errors(paths, 400, "INVALID_ID").await;
    let past = ["9223372036854775808", "18446744073709551616"];
    let paths = past.map(|id| format!("/v1/decode/{id}"));
    server.assert_get_errors(paths, 422, "INVALID_ID").await;
    // Above js53's 52 bits.
    let reply = server
        .get(&format!("/v1/decode/{}?layout=js53", 1u64 << 60))
        .await;
    reply.assert_error(422, "INVALID_ID");
    server
        .get("/v1/decode/")
        .await
        .assert_error(404, "NOT_FOUND");
    server
        .get("/v1/decode/1/2")
        .await
        .assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn public_ids_not_configured() {
    let server = Service::start("public-off", &[], PublicSettings::default()).await;
    for path in ["/v1/public/encode", "/v1/public/decode"] {
        let reply = server.post(path, r#"{"id":"1"}"#).await;
        reply.assert_error(501, "PUBLIC_IDS_NOT_CONFIGURED");
    }
}

#[tokio::test]
async fn public_ids_configured() {
    let keys = format!("2:{KEY_HEX}, 1:{OLD_KEY_HEX}");
    let public = PublicSettings {
        keys: Some(&keys),
        token: None,
    };
    let server = Service::start("public", &[], public).await;
    let codec = PublicIds::new(2, hex(KEY_HEX)).unwrap();
    let old = PublicIds::new(1, hex(OLD_KEY_HEX)).unwrap();
    let encode = |body: &'static [u8]| server.post("/v1/public/encode", body);
    let decode = |body: String| server.post("/v1/public/decode", body);
    let encoded = encode(br#"{"id":"383188013854781440"}"#).await.json();
    let expected = codec.encode_text(383_188_013_854_781_440).unwrap();
    assert_eq!(encoded["public"], expected.as_str());
    assert_eq!(encoded["id"], "383188013854781440");
    let lower = expected.as_str().to_lowercase();
    let decoded = decode(format!(r#"{{"public":"{lower}"}}"#)).await.json();
    assert_eq!(decoded["id"], "383188013854781440");
    assert_eq!(decoded["public"], expected.as_str());
    // A text form made with the old key still decodes.
    let old_text = old.encode_text(42).unwrap();
    let decoded_old = decode(format!(r#"{{"public":"{old_text}"}}"#)).await.json();
    assert_eq!(decoded_old["id"], "42");

    // Every error path of the two routes.
    for (body, status, code) in [
        (&b""[..], 400, "INVALID_REQUEST"),
        (b"not json", 400, "INVALID_REQUEST"),
        (b"[1]", 400, "INVALID_REQUEST"),
        (b"\xff\xfe{", 400, "INVALID_REQUEST"),
        (b"{}", 400, "INVALID_ARG_VALUE"),
        (br#"{"id":1}"#, 400, "INVALID_ARG_TYPE"),
        (br#"{"id":null}"#, 400, "INVALID_ARG_TYPE"),
        (br#"{"id":"-1"}"#, 400, "INVALID_ID"),
        (br#"{"id":"9223372036854775808"}"#, 422, "INVALID_ID"),
        // Only the documented field (a misspelt one is not ignored).
        (br#"{"id":"1","Id":"2"}"#, 400, "INVALID_REQUEST"),
    ] {
        encode(body).await.assert_error(status, code);
    }
    let mut typo = expected.as_str().as_bytes().to_vec();
    typo[5] = if typo[5] == b'A' { b'B' } else { b'A' };
    let typo = String::from_utf8(typo).unwrap();
    let unknown_version = PublicIds::new(7, hex(KEY_HEX))
        .unwrap()
        .encode_text(1)
        .unwrap();
    for (body, status, code) in [
        (
            r#"{"public":"0000000000000000","x":1}"#.to_owned(),
            400,
            "INVALID_REQUEST",
        ),
        (
            r#"{"public":"000000000000000U"}"#.to_owned(),
            400,
            "INVALID_PUBLIC_ID",
        ),
        (r#"{"public":"short"}"#.to_owned(), 400, "INVALID_PUBLIC_ID"),
        (
            format!(r#"{{"public":"{typo}"}}"#),
            422,
            "INVALID_PUBLIC_ID",
        ),
        (
            format!(r#"{{"public":"{unknown_version}"}}"#),
            422,
            "UNKNOWN_KEY_VERSION",
        ),
    ] {
        decode(body).await.assert_error(status, code);
    }
}

/// Bodies over the limit (1024 bytes): 413 PAYLOAD_TOO_LARGE, whether the JSON is small
/// enough to parse or a body of 8 MiB.
#[tokio::test]
async fn bodies_over_the_limit() {
    let public = PublicSettings {
        keys: Some(&format!("1:{KEY_HEX}")),
        token: None,
    };
    let server = Service::start("too-large", &[], public).await;
    let big = format!(r#"{{"id":"1","pad":"{}"}}"#, "x".repeat(5000));
    let reply = server.post("/v1/public/encode", big).await;
    reply.assert_error(413, "PAYLOAD_TOO_LARGE");
    let huge = vec![b'{'; 8 << 20];
    let reply = server.post("/v1/public/decode", huge).await;
    reply.assert_error(413, "PAYLOAD_TOO_LARGE");
    assert_eq!(server.get("/healthz").await.status, 200);
}

/// With a token the public-id routes need `Authorization: Bearer TOKEN`: 401 UNAUTHORIZED
/// with WWW-Authenticate otherwise (before saying whether keys are set), and the token is
/// never echoed. The id routes stay open.
#[tokio::test]
async fn public_routes_token() {
    const TOKEN: &str = "s3cret-token-0123456789";
    let keys = format!("1:{KEY_HEX}");
    let with_keys = PublicSettings {
        keys: Some(&keys),
        token: Some(TOKEN),
    };
    let without_keys = PublicSettings {
        keys: None,
        token: Some(TOKEN),
    };
    let server = Service::start("token", &[], with_keys).await;
    let unconfigured = Service::start("token-no-keys", &[], without_keys).await;
    for auth in [
        None,
        Some("Bearer wrong-token-0123456789"),
        Some(&format!("Bearer {TOKEN}x")[..]),
        Some(&format!("bearer{TOKEN}")[..]),
        Some(TOKEN),
    ] {
        for service in [&server, &unconfigured] {
            let reply = encode_42(service, auth).await;
            let body = reply.assert_error(401, "UNAUTHORIZED");
            assert!(reply.headers["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Bearer"));
            assert!(!body.to_string().contains("s3cret"), "{body}");
        }
    }
    let bearer = format!("Bearer {TOKEN}");
    let ok = encode_42(&server, Some(&bearer)).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    encode_42(&unconfigured, Some(&bearer))
        .await
        .assert_error(501, "PUBLIC_IDS_NOT_CONFIGURED");
    assert_eq!(server.get("/v1/id").await.status, 200);
}

/// `POST /v1/public/encode {"id":"42"}`, with `Authorization: auth` if given.
async fn encode_42(service: &Service, auth: Option<&str>) -> common::Reply {
    let mut headers = vec![(header::CONTENT_TYPE, "application/json")];
    headers.extend(auth.map(|auth| (header::AUTHORIZATION, auth)));
    service
        .call(
            Method::POST,
            "/v1/public/encode",
            &headers,
            r#"{"id":"42"}"#,
        )
        .await
}

fn hex(text: &str) -> [u8; 16] {
    let mut key = [0u8; 16];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap();
    }
    key
}

/// A lost lease heals through the lease crate's HealingGenerator: the lock file removed while
/// held (a newcomer takes its worker id), the server leases another worker id by itself, with
/// no refusal other than the retryable COORDINATOR_UNAVAILABLE meanwhile, and /readyz and the
/// metrics count the loss and the new lease.
#[tokio::test]
async fn a_lost_lease_heals_and_readiness_and_metrics_say_so() {
    let server = Service::start("heal", &[], PublicSettings::default()).await;
    assert_eq!(server.get("/readyz").await.json()["workerId"], 0);
    std::fs::remove_file(server.lock_file(0)).unwrap();
    let lease = format!(
        "file://{}?app=router",
        server
            .lock_file(0)
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .display()
    );
    let newcomer = tokio::task::spawn_blocking(move || {
        clockflake_lease::open(&lease, clockflake::Layout::CLOCKSEQ, Default::default())
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(newcomer.worker_id(), 0);
    let mut ids = Vec::new();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let ready = loop {
        let reply = server.get("/v1/id").await;
        match reply.status {
            200 => ids.push(reply.json()["id"].as_str().unwrap().parse::<u64>().unwrap()),
            _ => {
                reply.assert_error(503, "COORDINATOR_UNAVAILABLE");
            }
        }
        let ready = server.get("/readyz").await;
        let body = ready.json();
        // (lastError is cleared by the heal's event, just after the new lease is in place.)
        if ready.status == 200 && body["leases"] == 2 && body["lastError"].is_null() {
            break body;
        }
        assert!(std::time::Instant::now() < until, "not healed: {body}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    assert_eq!(ready["state"], "active");
    assert_eq!(ready["workerId"], 1);
    assert_eq!(ready["leasesLost"], 1);
    assert_eq!(ready["lastError"], serde_json::Value::Null);
    let metrics = server.get("/metrics").await.body;
    assert!(
        metrics.contains("clockflake_leases_lost_total 1\n"),
        "{metrics}"
    );
    for _ in 0..100 {
        let id = server.get("/v1/id").await.json()["id"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        ids.push(id);
    }
    ids.extend((0..100).map(|_| newcomer.next_id().unwrap()));
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "a duplicate id");
    newcomer.close().unwrap();
}

#[tokio::test]
async fn service_routes_and_http_errors() {
    let server = Service::start("service", &[], PublicSettings::default()).await;
    let health = server.get("/healthz").await;
    assert_eq!(
        (health.status, health.json()["status"].clone()),
        (200, "ok".into())
    );
    assert_eq!(health.headers["content-type"], "application/json");

    let ready = server.get("/readyz").await;
    assert_eq!(ready.status, 200);
    let ready = ready.json();
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["state"], "active");
    assert_eq!(ready["workerId"], 0);
    assert_eq!(ready["deadlineInMs"], serde_json::Value::Null);
    assert_eq!(ready["leases"], 1);
    assert_eq!(ready["leasesLost"], 0);
    assert_eq!(ready["lastError"], serde_json::Value::Null);

    // The OpenAPI document names every route the server has (and no other).
    let openapi = server.get("/openapi.json").await.json();
    assert_eq!(openapi["openapi"], "3.1.0");
    let mut documented: Vec<&str> = openapi["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    documented.sort_unstable();
    let mut served = vec![
        "/healthz",
        "/metrics",
        "/openapi.json",
        "/readyz",
        "/v1/decode/{id}",
        "/v1/id",
        "/v1/ids",
        "/v1/public/decode",
        "/v1/public/encode",
    ];
    served.sort_unstable();
    assert_eq!(documented, served);

    let paths = ["/v1/nope", "/", "/bench/constant"].map(str::to_owned);
    server.assert_get_errors(paths, 404, "NOT_FOUND").await;
    for (method, path) in [
        (Method::POST, "/v1/id"),
        (Method::DELETE, "/v1/ids?count=1"),
        (Method::GET, "/v1/public/encode"),
        (Method::PUT, "/metrics"),
    ] {
        let reply = server.call(method, path, &[], Body::empty()).await;
        reply.assert_error(405, "METHOD_NOT_ALLOWED");
    }
}

/// `--bench-constant-route` (a hidden flag; `api.rs` checks `--help` leaves it out) adds
/// `GET /bench/constant`, a fixed id from no generator.
#[tokio::test]
async fn bench_constant_route_is_behind_a_flag() {
    let settings = PublicSettings::default();
    let server = Service::start("constant", &["--bench-constant-route"], settings).await;
    let constant = server.get("/bench/constant").await;
    assert_eq!(constant.status, 200);
    assert_eq!(constant.headers["content-type"], "application/json");
    assert_eq!(constant.body, r#"{"id":"123456789012345678"}"#);
    let reply = server
        .call(Method::POST, "/bench/constant", &[], Body::empty())
        .await;
    reply.assert_error(405, "METHOD_NOT_ALLOWED");
}
