//! An open-loop load generator: `GET` over HTTP/1.1 keep-alive, or Redis `INCR`, from N
//! connections at a fixed total rate, with latency measured from each request's intended send
//! time (coordinated-omission correction, as wrk2 does it).
//!
//! ```text
//! clockflake-loadgen --target http://127.0.0.1:8080/v1/id --connections 10 --rate 5000 --seconds 10
//! clockflake-loadgen --target redis://:PASSWORD@127.0.0.1:6379/0 --connections 10 --rate 0
//! ```
//!
//! `--rate 0` is a closed loop (each connection sends as soon as its answer arrives): the
//! saturated throughput, latency measured from the actual send. One line of JSON per run.
//!
//! Why threads and blocking sockets rather than an async runtime: each connection sleeps until
//! its next send time, and sub-millisecond latencies need that sleep to be precise. tokio's
//! timer has a 1 ms resolution (a send up to 1 ms late, counted as latency from the intended
//! time); `nanosleep` with the thread's timer slack set to 1 µs wakes within tens of µs. A thread
//! per connection is cheap at 100 connections. Percentiles are exact (every sample is kept and
//! sorted), so no histogram is needed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

#[derive(Clone)]
enum Target {
    Http {
        addr: String,
        request: Vec<u8>,
    },
    Redis {
        addr: String,
        auth: Option<Vec<u8>>,
        db: Option<String>,
    },
}

struct Config {
    target: Target,
    connections: usize,
    rate: f64,
    seconds: f64,
    warmup: f64,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: clockflake-loadgen --target URL --connections N --rate PER_SECOND (0: closed loop) \
         [--seconds S (10)] [--warmup S (1)]\n  URL: http://HOST:PORT/PATH or \
         redis://[:PASSWORD@]HOST:PORT[/DB] (INCR clockflake:loadgen)"
    );
    ExitCode::from(2)
}

fn parse_target(url: &str) -> Result<Target, String> {
    if let Some(rest) = url.strip_prefix("http://") {
        let (addr, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: */*\r\n\r\n");
        return Ok(Target::Http {
            addr: addr.to_string(),
            request: request.into_bytes(),
        });
    }
    if let Some(rest) = url.strip_prefix("redis://") {
        let (auth, rest) = match rest.rfind('@') {
            Some(i) => {
                let userinfo = &rest[..i];
                let password = userinfo.split_once(':').map_or(userinfo, |(_, p)| p);
                let auth = resp(&[b"AUTH", password.as_bytes()]);
                (Some(auth), &rest[i + 1..])
            }
            None => (None, rest),
        };
        let (addr, db) = match rest.split_once('/') {
            Some((addr, db)) if !db.is_empty() => (addr, Some(db.to_string())),
            Some((addr, _)) => (addr, None),
            None => (rest, None),
        };
        return Ok(Target::Redis {
            addr: addr.to_string(),
            auth,
            db,
        });
    }
    Err(format!("unsupported target {url:?}: http:// or redis://"))
}

fn resp(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        out.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One connection: a request written, its whole answer read.
struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    request: Vec<u8>,
    http: bool,
    line: String,
    body: Vec<u8>,
}

impl Connection {
    fn open(target: &Target) -> std::io::Result<Connection> {
        let (addr, request, http) = match target {
            Target::Http { addr, request } => (addr, request.clone(), true),
            Target::Redis { addr, .. } => (addr, resp(&[b"INCR", b"clockflake:loadgen"]), false),
        };
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let writer = stream.try_clone()?;
        let mut connection = Connection {
            reader: BufReader::with_capacity(16 * 1024, stream),
            writer,
            request,
            http,
            line: String::new(),
            body: Vec::new(),
        };
        if let Target::Redis { auth, db, .. } = target {
            if let Some(auth) = auth {
                connection.command(auth)?;
            }
            if let Some(db) = db {
                connection.command(&resp(&[b"SELECT", db.as_bytes()]))?;
            }
        }
        Ok(connection)
    }

    fn command(&mut self, command: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(command)?;
        self.read_redis()
    }

    fn call(&mut self) -> std::io::Result<()> {
        self.writer.write_all(&self.request)?;
        if self.http {
            self.read_http()
        } else {
            self.read_redis()
        }
    }

    fn read_line(&mut self) -> std::io::Result<()> {
        self.line.clear();
        if self.reader.read_line(&mut self.line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed",
            ));
        }
        Ok(())
    }

    fn read_http(&mut self) -> std::io::Result<()> {
        self.read_line()?;
        let ok = self.line.starts_with("HTTP/1.1 200");
        let status = self.line.trim_end().to_string();
        let mut length = 0usize;
        loop {
            self.read_line()?;
            let header = self.line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value
                        .trim()
                        .parse()
                        .map_err(|_| invalid("content-length"))?;
                }
            }
        }
        self.body.resize(length, 0);
        self.reader.read_exact(&mut self.body)?;
        if ok {
            Ok(())
        } else {
            Err(invalid(&status))
        }
    }

    fn read_redis(&mut self) -> std::io::Result<()> {
        self.read_line()?;
        match self.line.as_bytes().first() {
            Some(b':') | Some(b'+') => Ok(()),
            _ => Err(invalid(self.line.trim_end())),
        }
    }
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("unexpected answer: {what}"),
    )
}

/// Sleeps until `deadline` with the thread's timer slack at 1 µs (the default 50 µs slack would
/// add up to 50 µs to every wake-up).
fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        thread::sleep(deadline - now);
    }
}

#[cfg(target_os = "linux")]
fn precise_timer() {
    extern "C" {
        fn prctl(option: i32, ...) -> i32;
    }
    const PR_SET_TIMERSLACK: i32 = 29;
    // SAFETY: prctl(PR_SET_TIMERSLACK, ns) takes an unsigned long and touches only this thread.
    unsafe {
        prctl(PR_SET_TIMERSLACK, 1000u64);
    }
}

#[cfg(not(target_os = "linux"))]
fn precise_timer() {}

struct Outcome {
    latencies_ns: Vec<u64>,
    sent: u64,
    errors: u64,
    first_error: Option<String>,
}

fn run_connection(
    config: &Config,
    index: usize,
    start: Instant,
    stop: &AtomicBool,
) -> Result<Outcome, String> {
    precise_timer();
    let mut connection = Connection::open(&config.target).map_err(|e| format!("connect: {e}"))?;
    let measure_from = start + Duration::from_secs_f64(config.warmup);
    let end = measure_from + Duration::from_secs_f64(config.seconds);
    let mut outcome = Outcome {
        latencies_ns: Vec::new(),
        sent: 0,
        errors: 0,
        first_error: None,
    };
    // Open loop: this connection's share of the rate, its sends spread across the interval.
    let interval = (config.rate > 0.0)
        .then(|| Duration::from_secs_f64(config.connections as f64 / config.rate));
    let offset = interval.map_or(Duration::ZERO, |i| {
        i.mul_f64(index as f64 / config.connections as f64)
    });
    let mut k: u32 = 0;
    loop {
        let intended = match interval {
            Some(interval) => {
                let intended = start + offset + interval * k;
                sleep_until(intended);
                intended
            }
            None => Instant::now(),
        };
        if intended >= end || stop.load(Ordering::Relaxed) {
            break;
        }
        k += 1;
        let result = connection.call();
        let done = Instant::now();
        let failed = result.is_err();
        if intended >= measure_from {
            outcome.sent += 1;
            match result {
                // From the intended send time: a late answer also delays the sends after it,
                // and each of those counts the wait it was made to do.
                Ok(()) => outcome
                    .latencies_ns
                    .push((done - intended).as_nanos() as u64),
                Err(error) => {
                    outcome.errors += 1;
                    outcome.first_error.get_or_insert_with(|| error.to_string());
                }
            }
        }
        if failed {
            // The answer may be half read: start again on a new connection.
            connection = Connection::open(&config.target).map_err(|e| format!("reconnect: {e}"))?;
        }
    }
    Ok(outcome)
}

fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // Nearest rank: the smallest sample at or above a fraction q of them.
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1000.0
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut target, mut connections, mut rate, mut seconds, mut warmup) =
        (None, None, None, 10.0, 1.0);
    while let Some(flag) = args.next() {
        let Some(value) = args.next() else {
            return usage();
        };
        match flag.as_str() {
            "--target" => target = Some(value),
            "--connections" => connections = value.parse::<usize>().ok(),
            "--rate" => rate = value.parse::<f64>().ok(),
            "--seconds" => seconds = value.parse().unwrap_or(f64::NAN),
            "--warmup" => warmup = value.parse().unwrap_or(f64::NAN),
            _ => return usage(),
        }
    }
    let (Some(target), Some(connections), Some(rate)) = (target, connections, rate) else {
        return usage();
    };
    if connections == 0
        || !rate.is_finite()
        || rate < 0.0
        || !seconds.is_finite()
        || seconds <= 0.0
        || !warmup.is_finite()
        || warmup < 0.0
    {
        return usage();
    }
    let target = match parse_target(&target) {
        Ok(target) => target,
        Err(error) => {
            eprintln!("clockflake-loadgen: {error}");
            return ExitCode::from(2);
        }
    };
    let config = Arc::new(Config {
        target,
        connections,
        rate,
        seconds,
        warmup,
    });
    let stop = Arc::new(AtomicBool::new(false));
    // Every thread connects first; the schedule starts once they all have.
    let start = Instant::now() + Duration::from_millis(200);
    let handles: Vec<_> = (0..connections)
        .map(|index| {
            let (config, stop) = (Arc::clone(&config), Arc::clone(&stop));
            thread::spawn(move || {
                let outcome = run_connection(&config, index, start, &stop);
                if outcome.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                outcome
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let (mut sent, mut errors, mut first_error) = (0u64, 0u64, None);
    for handle in handles {
        match handle.join() {
            Ok(Ok(outcome)) => {
                latencies.extend_from_slice(&outcome.latencies_ns);
                sent += outcome.sent;
                errors += outcome.errors;
                if first_error.is_none() {
                    first_error = outcome.first_error;
                }
            }
            Ok(Err(error)) => {
                eprintln!("clockflake-loadgen: {error}");
                return ExitCode::FAILURE;
            }
            Err(_) => return ExitCode::FAILURE,
        }
    }
    latencies.sort_unstable();
    if latencies.is_empty() {
        eprintln!("clockflake-loadgen: no answer measured ({errors} errors: {first_error:?})");
        return ExitCode::FAILURE;
    }
    let kind = match &config.target {
        Target::Http { .. } => "http",
        Target::Redis { .. } => "redis",
    };
    println!(
        "{{\"target\":\"{kind}\",\"connections\":{connections},\"rate\":{rate},\"seconds\":{seconds},\
         \"requests\":{sent},\"errors\":{errors},\"throughput\":{:.1},\"p50_us\":{:.1},\
         \"p90_us\":{:.1},\"p99_us\":{:.1},\"p999_us\":{:.1},\"max_us\":{:.1}}}",
        latencies.len() as f64 / seconds,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.9),
        percentile(&latencies, 0.99),
        percentile(&latencies, 0.999),
        latencies.last().map_or(f64::NAN, |&max| max as f64 / 1000.0),
    );
    if let Some(error) = first_error {
        eprintln!("clockflake-loadgen: {errors} errors, the first: {error}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
