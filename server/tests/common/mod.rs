//! Helpers shared by the server's integration tests: spawn the built binary, talk to it with a
//! real HTTP client (reqwest) or raw bytes over TCP; or call the router in the test's own
//! process (`in_process`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

// Temp dirs and namespaces, the same as the lease crate's tests (clockflake-test-support); not
// every test binary uses both.
#[allow(unused_imports)]
pub use clockflake_test_support::{app, temp_dir, TempDir};

pub const SERVER: &str = env!("CARGO_BIN_EXE_clockflake-server");

/// A running `clockflake-server`, killed on drop if still running.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub base: String,
}

impl Server {
    /// Starts the server on a loopback port the system picks; waits for its "listening" line.
    pub fn start(lease: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut command = Command::new(SERVER);
        command
            .args(["--lease", lease, "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("CLOCKFLAKE_PUBLIC_KEY")
            .env_remove("CLOCKFLAKE_PUBLIC_KEY_FILE")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn clockflake-server");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            // Keep draining so the server never blocks on a full pipe.
            for _ in lines {}
        });
        let line = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("clockflake-server printed no listening line within 30 s");
            }
        };
        let addr: SocketAddr = line
            .rsplit("http://")
            .next()
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Server {
            child,
            addr,
            base: format!("http://{addr}"),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name}");
    }

    /// Waits for the process to exit, at most `limit`.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < until,
                "server did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `/readyz` as JSON, whatever its status.
    pub fn readiness(&self) -> (u16, serde_json::Value) {
        let response = client().get(self.url("/readyz")).send().unwrap();
        let status = response.status().as_u16();
        (
            status,
            serde_json::from_str(&response.text().unwrap()).unwrap(),
        )
    }

    /// Waits until `/readyz` answers 200, at most `limit`.
    pub fn wait_ready(&self, limit: Duration) -> serde_json::Value {
        let until = Instant::now() + limit;
        loop {
            let (status, body) = self.readiness();
            if status == 200 {
                return body;
            }
            assert!(Instant::now() < until, "not ready within {limit:?}: {body}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// One response, read whole.
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {:?}", self.body))
    }

    /// Asserts an error body `{code, message, retryAtMs}` with this status and code.
    pub fn assert_error(&self, status: u16, code: &str) -> serde_json::Value {
        assert_eq!(self.status, status, "{}", self.body);
        let body = self.json();
        assert_eq!(body["code"], code, "{body}");
        assert!(
            body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
        assert!(body.get("retryAtMs").is_some(), "{body}");
        assert!(
            self.headers
                .get("content-type")
                .is_some_and(|v| v == "application/json"),
            "{:?}",
            self.headers
        );
        if status == 503 {
            let retry_after: u64 = self.headers["retry-after"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(retry_after >= 1, "{retry_after}");
        }
        body
    }
}

pub fn get(url: &str) -> Reply {
    send(client().get(url))
}

pub fn send(request: reqwest::blocking::RequestBuilder) -> Reply {
    let response = request.send().unwrap();
    Reply {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: response.text().unwrap(),
    }
}

/// Sends `request` as raw bytes and returns whatever comes back until the server closes the
/// connection (requests should say `Connection: close`), or `None` when nothing came back.
pub fn raw(addr: SocketAddr, request: &[u8]) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // The server may answer and close before reading a large body: ignore write errors. No
    // half-close: hyper drops a connection whose client shut its write side.
    let _ = stream.write_all(request);
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    (!reply.is_empty()).then_some(reply)
}

/// The status code of a raw HTTP/1.1 reply.
pub fn raw_status(reply: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(reply);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP reply: {text:?}"))
}

/// Ids from a `{"ids": [...]}` body.
pub fn ids_of(body: &serde_json::Value) -> Vec<u64> {
    body["ids"]
        .as_array()
        .unwrap_or_else(|| panic!("no ids in {body}"))
        .iter()
        .map(|id| id.as_str().unwrap().parse().unwrap())
        .collect()
}

/// A small deterministic PRNG for the fuzz cases (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Where the load generator is: `$CLOCKFLAKE_WRK`, else Debian's `wrk` on the PATH.
pub fn wrk() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CLOCKFLAKE_WRK") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("wrk"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .find(|path| path.is_file())
}

/// The router called in this process (`tower::ServiceExt::oneshot`), for what needs no server.
pub mod in_process;
