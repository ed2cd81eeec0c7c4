//! The HTTP API end to end, for what needs a process of its own: the built binary on a
//! `file://` lease in a temp dir (or a coordinator that is down), a real HTTP client, TLS, a
//! faked clock, the flags and environment variables and the exit code of bad ones, and a fuzz
//! of query strings and bodies over real connections that must never crash it. Every route and
//! error path that needs no process is tested in this process by router.rs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use clockflake::{Layout, PublicIds};
use common::{get, raw, raw_status, send, Rng, Server, TempDir};

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f";
const OLD_KEY_HEX: &str = "f0e0d0c0b0a090807060504030201000";

/// A `file://` lease in a directory of its own, removed when the `TempDir` is dropped.
fn file_lease(name: &str) -> (TempDir, String) {
    let dir = TempDir::new(name);
    let uri = format!("file://{}?app=api", dir.display());
    (dir, uri)
}

fn hex(text: &str) -> [u8; 16] {
    let mut key = [0u8; 16];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap();
    }
    key
}

/// `--help` names the environment variables, leaves out the benchmarks-only flag (the route it
/// adds is tested in router.rs) and has no flag for public-id keys.
#[test]
fn help_hides_the_bench_flag_and_names_no_key_flag() {
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

    let temp = TempDir::new("bad-config");
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

/// The public-id keys and token come from the environment (never from flags): with
/// CLOCKFLAKE_PUBLIC_KEY (the current key, then an old one) and CLOCKFLAKE_PUBLIC_TOKEN the
/// routes answer with those keys and only to `Authorization: Bearer TOKEN`; a bad token stops
/// the server with code 2 and is never echoed. Every answer of the routes is in router.rs.
#[test]
fn public_keys_and_token_from_the_environment() {
    const TOKEN: &str = "s3cret-token-0123456789";
    let keys = format!("2:{KEY_HEX}, 1:{OLD_KEY_HEX}");
    let (_lease_dir, lease) = file_lease("token");
    let server = Server::start(
        &lease,
        &[],
        &[
            ("CLOCKFLAKE_PUBLIC_KEY", keys.as_str()),
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
    post(None).assert_error(401, "UNAUTHORIZED");
    let ok = post(Some(&format!("Bearer {TOKEN}")));
    assert_eq!(ok.status, 200, "{}", ok.body);
    let current = PublicIds::new(2, hex(KEY_HEX)).unwrap();
    assert_eq!(
        ok.json()["public"],
        current.encode_text(42).unwrap().as_str()
    );
    let old_text = PublicIds::new(1, hex(OLD_KEY_HEX))
        .unwrap()
        .encode_text(7)
        .unwrap();
    let decoded = send(
        common::client()
            .post(server.url("/v1/public/decode"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(format!(r#"{{"public":"{old_text}"}}"#)),
    );
    assert_eq!(decoded.json()["id"], "7", "{}", decoded.body);
    drop(server);
    let (_lease_dir, lease) = file_lease("token-bad");
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
    let dir = TempDir::new("tls");
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
    let (_lease_dir, lease) = file_lease("tls");
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
        let dir = TempDir::new("clock-range");
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
    let dir = TempDir::new("faketime");
    let clock = dir.join("faketime");
    let clock_text = clock.to_str().unwrap();
    let env = [
        ("LD_PRELOAD", LIBFAKETIME),
        ("FAKETIME_TIMESTAMP_FILE", clock_text),
        ("FAKETIME_NO_CACHE", "1"),
        ("DONT_FAKE_MONOTONIC", "1"),
    ];
    std::fs::write(&clock, "@2100-01-01 00:00:00\n").unwrap();
    let (_lease_dir, lease) = file_lease("faketime-2100");
    let server = Server::start(&lease, &[], &env);
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
    let (_lease_dir, lease) = file_lease("faketime-1999");
    let server = Server::start(&lease, &[], &env);
    let body = get(&server.url("/v1/id")).assert_error(503, "EPOCH_IN_FUTURE");
    assert_eq!(body["retryAtMs"], Layout::CLOCKSEQ.epoch_ms(), "{body}");
}

/// A custom layout on the command line is core's: the same as the preset it spells out, and
/// refused with exit code 2 when core refuses it.
#[test]
fn custom_layout() {
    let spec = "timestamp:41,worker:10,sequence:12;unit=1ms;epoch=1288834974657";
    let (_lease_dir, lease) = file_lease("custom");
    let server = Server::start(&lease, &["--layout", spec], &[]);
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
    let (_lease_dir, lease) = file_lease("custom-bad");
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
    let (_lease_dir, lease) = file_lease("fuzz");
    let server = Server::start(
        &lease,
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
