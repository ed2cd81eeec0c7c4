//! A renewal given up on that reaches the server after a newer one never lowers the stored
//! marks. The renewal thread gives up on a renewal that does not answer in time and sends the
//! next on a new connection; the first may still reach the server (frozen, or its packets
//! late) and run after the second. Here a proxy holds the first renewal's bytes until the
//! second has been stored, then lets them through. PostgreSQL (`make test-lease`) raises each
//! mark to the stored one; Redis (`make test-redis`) refuses a renewal older than the one
//! stored. Without either, the stored marks fall back to the older renewal's, and a later holder
//! of the worker id would resume below ids issued under the newer reservation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clockflake::{Clock, Generator, Layout, Options, State};
use clockflake_lease::connect;
use common::*;

static SERIAL: Mutex<()> = Mutex::new(());

/// One client connection through the proxy.
struct Link {
    /// While set, the client's bytes are kept here instead of reaching the server...
    held: AtomicBool,
    /// ...but for this many reads first (a request's first round trip: PostgreSQL's prepare,
    /// Redis's ROLE check).
    passed: AtomicU32,
    /// The server answered after the held bytes were let through.
    answered_late: AtomicBool,
    released: AtomicBool,
}

/// A TCP proxy to `upstream` that can hold the bytes of the connections open now.
struct Proxy {
    port: u16,
    links: Arc<Mutex<Vec<Arc<Link>>>>,
}

impl Proxy {
    fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let links: Arc<Mutex<Vec<Arc<Link>>>> = Arc::default();
        let all = Arc::clone(&links);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let link = Arc::new(Link {
                    held: AtomicBool::new(false),
                    passed: AtomicU32::new(0),
                    answered_late: AtomicBool::new(false),
                    released: AtomicBool::new(false),
                });
                all.lock().unwrap().push(Arc::clone(&link));
                let (mut from_client, mut to_server) = (client.try_clone().unwrap(), server);
                let (mut from_server, mut to_client) = (to_server.try_clone().unwrap(), client);
                let up = Arc::clone(&link);
                std::thread::spawn(move || {
                    let mut kept = Vec::new();
                    let mut buffer = [0; 16 * 1024];
                    loop {
                        let read = from_client.read(&mut buffer).unwrap_or(0);
                        let passes = up
                            .passed
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                            .is_ok();
                        if up.held.load(Ordering::SeqCst) && !passes {
                            kept.extend_from_slice(&buffer[..read]);
                        } else {
                            let _ = to_server.write_all(&kept);
                            kept.clear();
                            let _ = to_server.write_all(&buffer[..read]);
                        }
                        if read == 0 {
                            break;
                        }
                    }
                    // The client has gone: what it sent still reaches the server once let
                    // through, as a packet delayed in the network would.
                    while up.held.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let _ = to_server.write_all(&kept);
                    std::thread::sleep(Duration::from_secs(2));
                    let _ = to_server.shutdown(Shutdown::Both);
                });
                let down = Arc::clone(&link);
                std::thread::spawn(move || {
                    let mut buffer = [0; 16 * 1024];
                    while let Ok(read) = from_server.read(&mut buffer) {
                        if read == 0 {
                            break;
                        }
                        if down.released.load(Ordering::SeqCst) {
                            down.answered_late.store(true, Ordering::SeqCst);
                        }
                        let _ = to_client.write_all(&buffer[..read]);
                    }
                });
            }
        });
        Proxy { port, links }
    }

    /// Holds what the connections open now send from here on, after `passed` reads; returns
    /// them.
    fn hold_open_links(&self, passed: u32) -> Vec<Arc<Link>> {
        let links = self.links.lock().unwrap().clone();
        for link in &links {
            link.passed.store(passed, Ordering::SeqCst);
            link.held.store(true, Ordering::SeqCst);
        }
        links
    }
}

/// Lets `links`' held bytes through and waits until the server has answered them.
fn release(links: &[Arc<Link>]) {
    for link in links {
        link.released.store(true, Ordering::SeqCst);
        link.held.store(false, Ordering::SeqCst);
    }
    let until = Instant::now() + Duration::from_secs(20);
    while !links
        .iter()
        .any(|link| link.answered_late.load(Ordering::SeqCst))
    {
        assert!(Instant::now() < until, "the late renewal never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A state of `worker_id` whose clock sequence 0 is marked at `mark_ms`.
fn state_at(worker_id: u64, mark_ms: u64) -> State {
    let gen = Generator::new(Layout::CLOCKSEQ, worker_id, Options::default()).unwrap();
    gen.next_id_at(mark_ms).unwrap();
    gen.state()
}

/// The scenario on `uri` (host and port `server`): grant, a renewal held by the proxy and
/// given up on, a newer one stored, then the held one let through. Returns the mark stored.
fn late_renewal(uri: &str, server: &str) -> (u64, u64) {
    let proxy = Proxy::start(server.to_owned());
    let proxied = uri.replace(server, &format!("127.0.0.1:{}", proxy.port));
    let (mut holder, _) = connect(&proxied).unwrap();
    let now_ms = clockflake::SystemClock.now_ms();
    let grant = holder.acquire(&Layout::CLOCKSEQ, now_ms).unwrap();
    let worker_id = grant.worker_id;
    let (older, newer) = (now_ms + 1_000, now_ms + 2_000);
    holder.renew(&state_at(worker_id, now_ms)).unwrap();
    // The renewal's first round trip goes through (PostgreSQL prepares its statement, Redis
    // answers ROLE); the request that writes is held.
    let held = proxy.hold_open_links(1);
    let given_up = holder.renew(&state_at(worker_id, older));
    assert_eq!(
        given_up.map_err(|error| error.code()),
        Err("COORDINATOR_UNAVAILABLE"),
        "the held renewal must time out"
    );
    holder.renew(&state_at(worker_id, newer)).unwrap();
    release(&held);
    let (mut reader, _) = connect(uri).unwrap();
    let stored = reader.read_state(worker_id).unwrap().unwrap();
    holder.release(None).unwrap();
    (stored.high_water_ms[0].unwrap(), newer)
}

#[test]
fn postgres_a_late_renewal_never_lowers_the_stored_marks() {
    let Some((_serial, _app, uri)) = PG.namespace(&SERIAL, "late", "4s") else {
        return;
    };
    let server = host_port(&uri);
    let (stored, newer) = late_renewal(&uri, &server);
    assert!(
        stored >= newer,
        "the late renewal lowered the mark: {stored} < {newer}"
    );
}

#[test]
fn redis_a_late_renewal_never_lowers_the_stored_marks() {
    let Some((_serial, _app, uri)) = REDIS.namespace(&SERIAL, "late", "4s") else {
        return;
    };
    let server = host_port(&uri);
    let (stored, newer) = late_renewal(&uri, &server);
    assert!(
        stored >= newer,
        "the late renewal lowered the mark: {stored} < {newer}"
    );
}

/// `127.0.0.1:PORT` of a coordinator URI on loopback.
fn host_port(uri: &str) -> String {
    let start = uri.find("127.0.0.1:").expect("a server on 127.0.0.1");
    let port: String = uri[start + "127.0.0.1:".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    format!("127.0.0.1:{port}")
}
