//! The HTTP API end to end: the built binary on a `file://` lease in a temp dir, a real HTTP
//! client, every error path, and a fuzz of query strings and bodies that must never crash it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashSet;

use clockflake::{Layout, PublicIds};
use common::{get, ids_of, raw, raw_status, send, Rng, Server};

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f";
const OLD_KEY_HEX: &str = "f0e0d0c0b0a090807060504030201000";

fn file_lease(name: &str) -> String {
    format!("file://{}?app=api", common::temp_dir(name).display())
}

#[test]
fn ids_json_and_text() {
    let server = Server::start(&file_lease("ids"), &[], &[]);
    let one = get(&server.url("/v1/id"));
    assert_eq!(one.status, 200);
    assert_eq!(one.headers["content-type"], "application/json");
    let first: u64 = one.json()["id"].as_str().unwrap().parse().unwrap();
    let parts = Layout::CLOCKSEQ.decode(first).unwrap();
    let now = clockflake_lease::wall_ms();
    assert!(
        parts.timestamp_ms.abs_diff(now) < 60_000,
        "{parts:?} at {now}"
    );

    let text = common::send(
        common::client()
            .get(server.url("/v1/id"))
            .header("accept", "text/plain"),
    );
    assert_eq!(text.status, 200);
    assert!(text.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let second: u64 = text.body.strip_suffix('\n').unwrap().parse().unwrap();
    assert!(second > first);

    // The documented maximum in one request, strictly increasing after the single ids.
    let many = get(&server.url("/v1/ids?count=100000"));
    assert_eq!(many.status, 200);
    let ids = ids_of(&many.json());
    assert_eq!(ids.len(), 100_000);
    assert!(ids[0] > second);
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));

    let lines = common::send(
        common::client()
            .get(server.url("/v1/ids?count=5000"))
            .header(
                "accept",
                "application/xml, text/plain;q=0.9, application/json;q=0.5",
            ),
    );
    assert_eq!(lines.status, 200);
    let text_ids: Vec<u64> = lines.body.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(text_ids.len(), 5000);
    assert!(lines.body.ends_with('\n'));
    assert!(text_ids[0] > ids[ids.len() - 1]);
    assert!(text_ids.windows(2).all(|pair| pair[0] < pair[1]));
    let all: HashSet<u64> = ids.iter().chain(&text_ids).copied().collect();
    assert_eq!(all.len(), 105_000);
}

#[test]
fn count_errors() {
    let server = Server::start(&file_lease("count"), &["--max-count", "1000"], &[]);
    assert_eq!(get(&server.url("/v1/ids?count=1000")).status, 200);
    for query in [
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
    ] {
        let reply = get(&server.url(&format!("/v1/ids{query}")));
        reply.assert_error(400, "INVALID_ARG_VALUE");
    }
    // Unknown parameters are ignored (cache busters).
    assert_eq!(get(&server.url("/v1/ids?count=2&nonce=abc")).status, 200);
}

#[test]
fn decode_route() {
    let server = Server::start(&file_lease("decode"), &["--layout", "twitter"], &[]);
    let id = Layout::TWITTER
        .encode(&clockflake::Parts {
            timestamp_ms: 1_704_067_200_000,
            clock_seq: 0,
            worker_id: 513,
            sequence: 7,
        })
        .unwrap();
    let body = get(&server.url(&format!("/v1/decode/{id}"))).json();
    assert_eq!(body["id"], id.to_string());
    assert_eq!(body["layout"], "twitter");
    assert_eq!(body["timestampMs"], 1_704_067_200_000u64);
    assert_eq!(body["time"], "2024-01-01T00:00:00.000Z");
    assert_eq!(body["workerId"], 513);
    assert_eq!(body["sequence"], 7);
    assert_eq!(body["clockSeq"], 0);

    let other = get(&server.url(&format!("/v1/decode/{id}?layout=sonyflake"))).json();
    assert_eq!(other["layout"], "sonyflake");
    let expected = Layout::SONYFLAKE.decode(id).unwrap();
    assert_eq!(other["workerId"], expected.worker_id);

    get(&server.url("/v1/decode/1?layout=nope")).assert_error(400, "UNKNOWN_LAYOUT");
    get(&server.url("/v1/decode/1?layout=twitter&layout=js53"))
        .assert_error(400, "INVALID_ARG_VALUE");
    // Malformed: 400. Well-formed (1 to 20 digits, as openapi.json says) but past the
    // layout's range: 422, the same code.
    for bad in [
        "abc",
        "-1",
        "1.0",
        "%20",
        "99999999999999999999999",
        "%FF%FE",
        "%E2%82%AC",
    ] {
        get(&server.url(&format!("/v1/decode/{bad}"))).assert_error(400, "INVALID_ID");
    }
    for past in ["9223372036854775808", "18446744073709551616"] {
        get(&server.url(&format!("/v1/decode/{past}"))).assert_error(422, "INVALID_ID");
    }
    // Above js53's 52 bits.
    get(&server.url(&format!("/v1/decode/{}?layout=js53", 1u64 << 60)))
        .assert_error(422, "INVALID_ID");
    get(&server.url("/v1/decode/")).assert_error(404, "NOT_FOUND");
    get(&server.url("/v1/decode/1/2")).assert_error(404, "NOT_FOUND");
}

#[test]
fn public_ids_configured_and_not() {
    let plain = Server::start(&file_lease("public-off"), &[], &[]);
    for path in ["/v1/public/encode", "/v1/public/decode"] {
        send(common::client().post(plain.url(path)).body(r#"{"id":"1"}"#))
            .assert_error(501, "PUBLIC_IDS_NOT_CONFIGURED");
    }
    drop(plain);

    let keys = format!("2:{KEY_HEX}, 1:{OLD_KEY_HEX}");
    let server = Server::start(
        &file_lease("public"),
        &[],
        &[("CLOCKFLAKE_PUBLIC_KEY", keys.as_str())],
    );
    let codec = PublicIds::new(2, hex(KEY_HEX)).unwrap();
    let old = PublicIds::new(1, hex(OLD_KEY_HEX)).unwrap();
    let post = |path: &str, body: &[u8]| {
        send(
            common::client()
                .post(server.url(path))
                .header("content-type", "application/json")
                .body(body.to_vec()),
        )
    };
    let encoded = post("/v1/public/encode", br#"{"id":"383188013854781440"}"#).json();
    let expected = codec.encode_text(383_188_013_854_781_440).unwrap();
    assert_eq!(encoded["public"], expected.as_str());
    assert_eq!(encoded["id"], "383188013854781440");
    let lower = expected.as_str().to_lowercase();
    let decoded = post(
        "/v1/public/decode",
        format!(r#"{{"public":"{lower}"}}"#).as_bytes(),
    )
    .json();
    assert_eq!(decoded["id"], "383188013854781440");
    // A text form made with the old key still decodes.
    let old_text = old.encode_text(42).unwrap();
    let decoded_old = post(
        "/v1/public/decode",
        format!(r#"{{"public":"{old_text}"}}"#).as_bytes(),
    )
    .json();
    assert_eq!(decoded_old["id"], "42");

    // Every error path of the two routes.
    post("/v1/public/encode", b"").assert_error(400, "INVALID_REQUEST");
    post("/v1/public/encode", b"not json").assert_error(400, "INVALID_REQUEST");
    post("/v1/public/encode", b"[1]").assert_error(400, "INVALID_REQUEST");
    post("/v1/public/encode", b"\xff\xfe{").assert_error(400, "INVALID_REQUEST");
    post("/v1/public/encode", b"{}").assert_error(400, "INVALID_ARG_VALUE");
    post("/v1/public/encode", br#"{"id":1}"#).assert_error(400, "INVALID_ARG_TYPE");
    post("/v1/public/encode", br#"{"id":null}"#).assert_error(400, "INVALID_ARG_TYPE");
    post("/v1/public/encode", br#"{"id":"-1"}"#).assert_error(400, "INVALID_ID");
    post("/v1/public/encode", br#"{"id":"9223372036854775808"}"#).assert_error(422, "INVALID_ID");
    // Only the documented field (a misspelt one is not ignored).
    post("/v1/public/encode", br#"{"id":"1","Id":"2"}"#).assert_error(400, "INVALID_REQUEST");
    post(
        "/v1/public/decode",
        br#"{"public":"0000000000000000","x":1}"#,
    )
    .assert_error(400, "INVALID_REQUEST");
    post("/v1/public/decode", br#"{"public":"000000000000000U"}"#)
        .assert_error(400, "INVALID_PUBLIC_ID");
    post("/v1/public/decode", br#"{"public":"short"}"#).assert_error(400, "INVALID_PUBLIC_ID");
    let mut typo = expected.as_str().as_bytes().to_vec();
    typo[5] = if typo[5] == b'A' { b'B' } else { b'A' };
    post(
        "/v1/public/decode",
        format!(r#"{{"public":"{}"}}"#, String::from_utf8(typo).unwrap()).as_bytes(),
    )
    .assert_error(422, "INVALID_PUBLIC_ID");
    let unknown_version = PublicIds::new(7, hex(KEY_HEX))
        .unwrap()
        .encode_text(1)
        .unwrap();
    post(
        "/v1/public/decode",
        format!(r#"{{"public":"{unknown_version}"}}"#).as_bytes(),
    )
    .assert_error(422, "UNKNOWN_KEY_VERSION");
    let big = format!(r#"{{"id":"1","pad":"{}"}}"#, "x".repeat(5000));
    post("/v1/public/encode", big.as_bytes()).assert_error(413, "PAYLOAD_TOO_LARGE");
    // A huge body sent raw: 413 (or the connection closed after it), never a crash.
    let mut request = format!(
        "POST /v1/public/decode HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        8 << 20
    )
    .into_bytes();
    request.extend(std::iter::repeat_n(b'{', 8 << 20));
    if let Some(reply) = raw(server.addr, &request) {
        assert_eq!(raw_status(&reply), 413);
    }
    assert_eq!(get(&server.url("/healthz")).status, 200);
}

fn hex(text: &str) -> [u8; 16] {
    let mut key = [0u8; 16];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap();
    }
    key
}

#[test]
fn service_routes_and_http_errors() {
    let server = Server::start(&file_lease("service"), &[], &[]);
    let health = get(&server.url("/healthz"));
    assert_eq!(
        (health.status, health.json()["status"].clone()),
        (200, "ok".into())
    );

    let ready = get(&server.url("/readyz"));
    assert_eq!(ready.status, 200);
    let ready = ready.json();
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["state"], "active");
    assert_eq!(ready["workerId"], 0);
    assert_eq!(ready["deadlineInMs"], serde_json::Value::Null);
    assert_eq!(ready["leases"], 1);

    // The OpenAPI document names every route the server has (and no other).
    let openapi = get(&server.url("/openapi.json")).json();
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

    get(&server.url("/v1/nope")).assert_error(404, "NOT_FOUND");
    get(&server.url("/")).assert_error(404, "NOT_FOUND");
    get(&server.url("/bench/constant")).assert_error(404, "NOT_FOUND");
    let client = common::client();
    send(client.post(server.url("/v1/id"))).assert_error(405, "METHOD_NOT_ALLOWED");
    send(client.delete(server.url("/v1/ids?count=1"))).assert_error(405, "METHOD_NOT_ALLOWED");
    send(client.get(server.url("/v1/public/encode"))).assert_error(405, "METHOD_NOT_ALLOWED");
    send(client.put(server.url("/metrics"))).assert_error(405, "METHOD_NOT_ALLOWED");

    // Metrics after some traffic: every family the README promises.
    for _ in 0..3 {
        get(&server.url("/v1/id"));
    }
    get(&server.url("/v1/ids?count=10"));
    let metrics = get(&server.url("/metrics"));
    assert_eq!(metrics.status, 200);
    assert!(metrics.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = metrics.body;
    for needle in [
        "clockflake_ids_issued_total 13",
        "clockflake_http_requests_total{route=\"/v1/id\",status=\"200\"} 3",
        "clockflake_http_requests_total{route=\"/v1/id\",status=\"405\"} 1",
        "clockflake_http_requests_total{route=\"unmatched\",status=\"404\"}",
        "clockflake_http_request_duration_seconds_bucket{route=\"/v1/id\",le=\"0.001\"}",
        "clockflake_ready 1",
        "clockflake_lease_state{state=\"active\"} 1",
        "clockflake_lease_state{state=\"lost\"} 0",
        "clockflake_lease_worker_id 0",
        "clockflake_lease_deadline_seconds -1",
        "clockflake_leases_total 1",
        "clockflake_leases_lost_total 0",
        "clockflake_lease_renewals_total",
        "clockflake_lease_renewal_failures_total 0",
        "clockflake_clock_steps_back_total 0",
        "clockflake_clock_seq_switches_total 0",
        "clockflake_generator_waits_total",
        "clockflake_generator_wait_microseconds_total",
    ] {
        assert!(text.contains(needle), "{needle} missing from\n{text}");
    }
}

#[test]
fn bench_constant_route_is_hidden_behind_a_flag() {
    let server = Server::start(&file_lease("constant"), &["--bench-constant-route"], &[]);
    assert_eq!(get(&server.url("/bench/constant")).status, 200);
    let help = std::process::Command::new(common::SERVER)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains("CLOCKFLAKE_LEASE") && !help.contains("bench-constant"));
    assert!(
        !help.contains("public-key"),
        "keys are never flags:\n{help}"
    );
}

/// A coordinator that cannot be reached: the server starts anyway, unready, and answers
/// 503 COORDINATOR_UNAVAILABLE with Retry-After; a bad configuration stops it with code 2.
#[test]
fn unavailable_coordinator_and_bad_configuration() {
    let server = Server::start("postgres://postgres@127.0.0.1:1/none?ttl=1s", &[], &[]);
    let reply = get(&server.url("/v1/id"));
    let body = reply.assert_error(503, "COORDINATOR_UNAVAILABLE");
    assert!(!body["message"].as_str().unwrap().contains("password"));
    // retryAtMs: the supervisor's next attempt, within its longest backoff.
    let retry_at = body["retryAtMs"].as_u64().expect("retryAtMs");
    assert!(retry_at <= clockflake_lease::wall_ms() + 6_000, "{body}");
    get(&server.url("/v1/ids?count=3")).assert_error(503, "COORDINATOR_UNAVAILABLE");
    // Input errors still win over the missing lease.
    get(&server.url("/v1/ids?count=0")).assert_error(400, "INVALID_ARG_VALUE");
    // Decoding needs no lease.
    assert_eq!(get(&server.url("/v1/decode/1")).status, 200);
    let (status, ready) = server.readiness();
    assert_eq!(status, 503);
    assert_eq!(ready["ready"], false);
    assert_eq!(ready["state"], "leasing");
    assert_eq!(ready["lastError"]["code"], "COORDINATOR_UNAVAILABLE");
    let metrics = get(&server.url("/metrics")).body;
    assert!(metrics.contains("clockflake_ready 0"), "{metrics}");
    assert!(
        metrics.contains("clockflake_lease_state{state=\"leasing\"} 1"),
        "{metrics}"
    );
    drop(server);

    let temp = common::temp_dir("bad-config");
    let lease = format!("file://{}", temp.display());
    for (args, env) in [
        (vec!["--lease", "ftp://example/x"], vec![]),
        (vec!["--lease", &lease, "--layout", "nope"], vec![]),
        (vec!["--lease", &lease, "--on-rollback", "sideways"], vec![]),
        (vec!["--lease", &lease, "--ready-margin", "soon"], vec![]),
        (vec!["--lease", &lease, "--max-count", "0"], vec![]),
        (
            vec!["--lease", &lease],
            vec![("CLOCKFLAKE_PUBLIC_KEY", "1:zz")],
        ),
        (
            vec!["--lease", &lease],
            vec![("CLOCKFLAKE_PUBLIC_KEY_FILE", "/nonexistent/key")],
        ),
        (vec!["--listen", "127.0.0.1:0"], vec![]),
        // baidu's timestamp ran out in 2024: it decodes but refuses to generate.
        (vec!["--lease", &lease, "--layout", "baidu"], vec![]),
    ] {
        let output = std::process::Command::new(common::SERVER)
            .args(&args)
            .args(["--listen", "127.0.0.1:0"])
            .env_remove("CLOCKFLAKE_LEASE")
            .env_remove("CLOCKFLAKE_PUBLIC_KEY")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?} {env:?}: {output:?}"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("zz"), "key echoed: {stderr}");
    }
}

/// With CLOCKFLAKE_PUBLIC_TOKEN the public-id routes need `Authorization: Bearer TOKEN`: 401
/// UNAUTHORIZED with WWW-Authenticate otherwise (before saying whether keys are set), and the
/// token is never echoed. The id routes stay open.
#[test]
fn public_routes_token() {
    const TOKEN: &str = "s3cret-token-0123456789";
    let server = Server::start(
        &file_lease("token"),
        &[],
        &[
            ("CLOCKFLAKE_PUBLIC_KEY", &format!("1:{KEY_HEX}")),
            ("CLOCKFLAKE_PUBLIC_TOKEN", TOKEN),
        ],
    );
    let post = |auth: Option<&str>| {
        let mut request = common::client()
            .post(server.url("/v1/public/encode"))
            .header("content-type", "application/json")
            .body(r#"{"id":"42"}"#);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        common::send(request)
    };
    for auth in [
        None,
        Some("Bearer wrong-token-0123456789"),
        Some(&format!("Bearer {TOKEN}x")[..]),
        Some(&format!("bearer{TOKEN}")[..]),
        Some(TOKEN),
    ] {
        let reply = post(auth);
        let body = reply.assert_error(401, "UNAUTHORIZED");
        assert!(reply.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer"));
        assert!(!body.to_string().contains("s3cret"), "{body}");
    }
    let ok = post(Some(&format!("Bearer {TOKEN}")));
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(get(&server.url("/v1/id")).status, 200);
    drop(server);
    let lease = file_lease("token-bad");
    for (name, value) in [
        ("CLOCKFLAKE_PUBLIC_TOKEN", "short"),
        ("CLOCKFLAKE_PUBLIC_TOKEN", "has a space in it 0123456789"),
        ("CLOCKFLAKE_PUBLIC_TOKEN_FILE", "/nonexistent/token"),
    ] {
        let output = std::process::Command::new(common::SERVER)
            .args(["--lease", &lease, "--listen", "127.0.0.1:0"])
            .env(name, value)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{name}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("has a space"), "token echoed: {stderr}");
    }
}

/// HTTPS with --tls-cert and --tls-key (a throwaway certificate from openssl, checked by curl
/// against it): ids over TLS, plain HTTP refused, and bad files stop the server with code 2.
#[test]
fn tls_listener() {
    let tools = ["openssl", "curl"].iter().all(|tool| {
        std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
            || std::process::Command::new(tool)
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success())
    });
    if !tools {
        assert!(
            std::env::var("CLOCKFLAKE_SERVER_REQUIRED").as_deref() != Ok("1"),
            "openssl and curl are needed"
        );
        eprintln!("skipped: openssl or curl not found");
        return;
    }
    let dir = common::temp_dir("tls");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let lease = file_lease("tls");
    let mut command = std::process::Command::new(common::SERVER);
    command
        .args(["--lease", &lease, "--listen", "127.0.0.1:0"])
        .args(["--tls-cert", cert, "--tls-key", key])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let base = line.trim().rsplit(' ').next().unwrap().to_owned();
    assert!(base.starts_with("https://"), "{line}");
    let curl = |url: &str, extra: &[&str]| {
        std::process::Command::new("curl")
            .args(["-sS", "--max-time", "10", "--cacert", cert])
            .args(extra)
            .arg(url)
            .output()
            .unwrap()
    };
    let over_tls = curl(&format!("{base}/v1/id"), &[]);
    assert!(over_tls.status.success(), "{over_tls:?}");
    let body: serde_json::Value = serde_json::from_slice(&over_tls.stdout).unwrap();
    assert!(
        body["id"].as_str().unwrap().parse::<u64>().is_ok(),
        "{body}"
    );
    let plain = curl(&base.replace("https://", "http://"), &[]);
    assert!(
        !plain.status.success(),
        "plain HTTP answered on the TLS port"
    );
    // Still serving after a failed handshake.
    assert!(curl(&format!("{base}/healthz"), &[]).status.success());
    let _ = child.kill();
    let _ = child.wait();
    for (cert_arg, key_arg) in [(cert, "/nonexistent/key.pem"), (key, key), (cert, cert)] {
        let output = std::process::Command::new(common::SERVER)
            .args(["--lease", &lease, "--listen", "127.0.0.1:0"])
            .args(["--tls-cert", cert_arg, "--tls-key", key_arg])
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{cert_arg} {key_arg}: {output:?}"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("PRIVATE KEY"), "key echoed: {stderr}");
    }
}

/// The clock outside the layout's lifetime (a custom layout whose timestamp field ran out in
/// 1970, one whose epoch is in 2099): the id routes answer the real code, not
/// COORDINATOR_UNAVAILABLE: TIMESTAMP_EXHAUSTED is a 500 with no retryAtMs (final for this
/// clock), EPOCH_IN_FUTURE a 503 with retryAtMs at the epoch. The server stays up and unready,
/// takes no lease (it asks the coordinator once at start, then only looks at the clock), and
/// says why on /readyz and /metrics.
#[test]
fn clock_outside_the_layout_lifetime() {
    let epoch_2099 = 4_070_908_800_000u64;
    for (layout, status, code, retry_at) in [
        (
            "timestamp:20,worker:7,sequence:12;epoch=0".to_owned(),
            500,
            "TIMESTAMP_EXHAUSTED",
            None,
        ),
        (
            "timestamp:41,clock_seq:3,worker:7,sequence:12;unit=1ms;epoch=2099-01-01T00:00:00Z"
                .to_owned(),
            503,
            "EPOCH_IN_FUTURE",
            Some(epoch_2099),
        ),
    ] {
        let dir = common::temp_dir("clock-range");
        let lease = format!("file://{}?app=clock", dir.join("leases").display());
        let server = Server::start(&lease, &["--layout", &layout], &[]);
        for path in ["/v1/id", "/v1/ids?count=2"] {
            let body = get(&server.url(path)).assert_error(status, code);
            assert_eq!(body["retryAtMs"].as_u64(), retry_at, "{layout}: {body}");
        }
        let (ready_status, ready) = server.readiness();
        assert_eq!(ready_status, 503, "{ready}");
        assert_eq!(ready["lastError"]["code"], code, "{ready}");
        let metrics = get(&server.url("/metrics")).body;
        assert!(metrics.contains("clockflake_clock_in_range 0"), "{metrics}");
        // Ids still decode under the layout; no coordinator was asked.
        assert_eq!(get(&server.url("/v1/decode/1")).status, 200);
        std::thread::sleep(std::time::Duration::from_millis(1200));
        get(&server.url("/v1/id")).assert_error(status, code);
        assert_eq!(server.readiness().1["leases"], 0);
    }
}

/// Debian's libfaketime, which fakes the clock of the process it is preloaded into.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The same with the default preset and the process's own clock faked (libfaketime, read
/// from a file on every call): at 2100 the server answers 500 TIMESTAMP_EXHAUSTED; when the
/// clock is set right it leases and serves ids with no restart. At 1999, 503 EPOCH_IN_FUTURE
/// with retryAtMs at clockseq's epoch.
#[test]
fn faked_clock_outside_the_layout_and_back() {
    if !std::path::Path::new(LIBFAKETIME).exists() {
        assert!(
            std::env::var("CLOCKFLAKE_SERVER_REQUIRED").as_deref() != Ok("1"),
            "{LIBFAKETIME} not found (make setup-faketime installs it)"
        );
        eprintln!("skipped: {LIBFAKETIME} not found (make setup-faketime installs it)");
        return;
    }
    let dir = common::temp_dir("faketime");
    let clock = dir.join("faketime");
    let clock_text = clock.to_str().unwrap();
    let env = [
        ("LD_PRELOAD", LIBFAKETIME),
        ("FAKETIME_TIMESTAMP_FILE", clock_text),
        ("FAKETIME_NO_CACHE", "1"),
        ("DONT_FAKE_MONOTONIC", "1"),
    ];
    std::fs::write(&clock, "@2100-01-01 00:00:00\n").unwrap();
    let server = Server::start(&file_lease("faketime-2100"), &[], &env);
    let body = get(&server.url("/v1/id")).assert_error(500, "TIMESTAMP_EXHAUSTED");
    assert!(body["retryAtMs"].is_null(), "{body}");
    let (status, ready) = server.readiness();
    assert_eq!(status, 503);
    assert_eq!(ready["lastError"]["code"], "TIMESTAMP_EXHAUSTED", "{ready}");
    // The clock set right: a lease within the supervisor's next look (1 s), then ids of now.
    std::fs::write(&clock, "+0\n").unwrap();
    server.wait_ready(std::time::Duration::from_secs(10));
    let id: u64 = get(&server.url("/v1/id")).json()["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let parts = Layout::CLOCKSEQ.decode(id).unwrap();
    assert!(parts.timestamp_ms.abs_diff(clockflake_lease::wall_ms()) < 60_000);
    drop(server);

    std::fs::write(&clock, "@1999-01-01 00:00:00\n").unwrap();
    let server = Server::start(&file_lease("faketime-1999"), &[], &env);
    let body = get(&server.url("/v1/id")).assert_error(503, "EPOCH_IN_FUTURE");
    assert_eq!(body["retryAtMs"], Layout::CLOCKSEQ.epoch_ms(), "{body}");
}

/// A custom layout on the command line is core's: the same as the preset it spells out, and
/// refused with exit code 2 when core refuses it.
#[test]
fn custom_layout() {
    let spec = "timestamp:41,worker:10,sequence:12;unit=1ms;epoch=1288834974657";
    let server = Server::start(&file_lease("custom"), &["--layout", spec], &[]);
    let id: u64 = get(&server.url("/v1/id")).json()["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let parts = Layout::TWITTER.decode(id).unwrap();
    assert!(parts.timestamp_ms.abs_diff(clockflake_lease::wall_ms()) < 60_000);
    let decoded = get(&server.url(&format!("/v1/decode/{id}"))).json();
    assert_eq!(decoded["workerId"], parts.worker_id);
    drop(server);
    let lease = file_lease("custom-bad");
    for bad in [
        "timestamp:41,worker:10,sequence:13;epoch=0",
        "timestamp:41,worker:10;epoch=0",
        "timestamp:41,worker:10,sequence:12",
        "worker:10,timestamp:41,sequence:12;epoch=0",
    ] {
        let output = std::process::Command::new(common::SERVER)
            .args([
                "--lease",
                &lease,
                "--listen",
                "127.0.0.1:0",
                "--layout",
                bad,
            ])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{bad}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--layout"), "{bad}: {stderr}");
    }
}

/// Random bytes, huge numbers and broken encodings in the path, query, headers and bodies:
/// every reply is a well-formed HTTP reply below 500, and the server stays up.
#[test]
fn fuzz_never_crashes() {
    let server = Server::start(
        &file_lease("fuzz"),
        &[],
        &[("CLOCKFLAKE_PUBLIC_KEY", &format!("1:{KEY_HEX}"))],
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let paths = [
        "/v1/ids?count=",
        "/v1/decode/",
        "/v1/id?",
        "/v1/decode/1?layout=",
    ];
    let pieces: [&[u8]; 14] = [
        b"%FF",
        b"%00",
        b"%",
        b"%G1",
        b"-",
        b"99999999999999999999999",
        b"18446744073709551615",
        b"&count=",
        b"=",
        b"\xc3\x28",
        b"\xf0\x9f\x92\xa9",
        b"%2e%2e/",
        b"+",
        b"1",
    ];
    let mut answered = 0;
    for round in 0..400 {
        let mut target = paths[rng.below(paths.len() as u64) as usize]
            .as_bytes()
            .to_vec();
        for _ in 0..rng.below(6) {
            if rng.below(3) == 0 {
                let len = rng.below(12) as usize;
                target.extend(rng.bytes(len));
            } else {
                target.extend_from_slice(pieces[rng.below(pieces.len() as u64) as usize]);
            }
        }
        let (method, body): (&str, Vec<u8>) = match round % 4 {
            0 | 1 => ("GET", Vec::new()),
            2 => {
                target = b"/v1/public/decode".to_vec();
                let len = rng.below(64) as usize;
                let mut body = b"{\"public\":\"".to_vec();
                body.extend(rng.bytes(len));
                ("POST", body)
            }
            _ => {
                target = b"/v1/public/encode".to_vec();
                let len = rng.below(2048) as usize;
                ("POST", rng.bytes(len))
            }
        };
        let mut request = format!("{method} ").into_bytes();
        request.extend(&target);
        request.extend_from_slice(
            format!(
                " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept: {}\r\nContent-Length: {}\r\n\r\n",
                ["text/plain", "*/*", "application/json;q=x", "\u{1}"][round % 4],
                body.len()
            )
            .as_bytes(),
        );
        request.extend(&body);
        if let Some(reply) = raw(server.addr, &request) {
            let status = raw_status(&reply);
            assert!(
                (200..500).contains(&status),
                "{status} for {:?}",
                String::from_utf8_lossy(&request)
            );
            answered += 1;
        } else {
            eprintln!(
                "no reply: {:?}",
                String::from_utf8_lossy(&request[..request.len().min(120)])
            );
        }
    }
    assert!(answered > 300, "only {answered} replies");
    // Well-formed requests with hostile values through the real client too.
    let client = common::client();
    for _ in 0..100 {
        let n = rng.next();
        let signed = n as i64;
        for url in [
            format!("/v1/ids?count={n}"),
            format!("/v1/ids?count={signed}"),
            format!("/v1/decode/{n}"),
            format!("/v1/decode/{signed}"),
        ] {
            let reply = send(client.get(server.url(&url)));
            assert!(reply.status < 500, "{url}: {}", reply.body);
        }
    }
    let health = get(&server.url("/healthz"));
    assert_eq!(health.status, 200);
    assert_eq!(get(&server.url("/v1/id")).status, 200);
}
