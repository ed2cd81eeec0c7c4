//! Flags and environment variables, and the public-id keys (environment or file only).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use clockflake::{Layout, Policy, PublicIds};

/// The most ids one `GET /v1/ids` may ask for, unless `--max-count` says otherwise.
pub const DEFAULT_MAX_COUNT: u64 = 100_000;

/// The id service: ids over HTTP from a leased worker id.
///
/// Every flag has an environment variable. The public-id key is read from
/// `CLOCKFLAKE_PUBLIC_KEY_FILE` or `CLOCKFLAKE_PUBLIC_KEY` only, never from a flag, so it
/// never shows in `ps`.
#[derive(Debug, Parser)]
#[command(name = "clockflake-server", version, about, long_about = None)]
pub struct Config {
    /// Where the worker id is leased from: file:///DIR?app=NAME, postgres://USER@HOST:PORT/DB?app=NAME&ttl=10s
    /// or zookeeper://HOST:PORT/snowflake/APP?ttl=10s (prefer the environment variable when
    /// the URI carries a password).
    #[arg(long, env = "CLOCKFLAKE_LEASE", hide_env_values = true)]
    pub lease: String,

    /// Address to listen on.
    #[arg(long, env = "CLOCKFLAKE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Layout preset: clockseq, twitter, discord, sonyflake, baidu or js53.
    #[arg(long, env = "CLOCKFLAKE_LAYOUT", default_value = "clockseq")]
    pub layout: String,

    /// Rollback policy: clock-sequence, wait, logical or fail (default: the layout's).
    #[arg(long, env = "CLOCKFLAKE_ON_ROLLBACK")]
    pub on_rollback: Option<String>,

    /// Most ids one `GET /v1/ids` request may ask for.
    #[arg(long, env = "CLOCKFLAKE_MAX_COUNT", default_value_t = DEFAULT_MAX_COUNT,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_count: u64,

    /// `/readyz` turns red when the lease deadline is this close (e.g. 500ms, 1s).
    #[arg(long, env = "CLOCKFLAKE_READY_MARGIN", default_value = "250ms", value_parser = parse_duration)]
    pub ready_margin: Duration,

    /// On SIGTERM/SIGINT, longest wait for in-flight requests before the lease is closed.
    #[arg(long, env = "CLOCKFLAKE_SHUTDOWN_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,

    /// Benchmarks only: also serve `GET /bench/constant`, a handler returning a constant.
    #[arg(long, hide = true)]
    pub bench_constant_route: bool,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    clockflake_lease::parse_duration(text)
        .ok_or_else(|| format!("expected a duration such as 250ms, 10s or 2m, found {text:?}"))
}

impl Config {
    /// The layout preset named by `--layout`.
    pub fn layout(&self) -> Result<Layout, String> {
        Layout::by_name(&self.layout).map_err(|error| format!("--layout: {error}"))
    }

    /// The rollback policy named by `--on-rollback`, if any.
    pub fn policy(&self) -> Result<Option<Policy>, String> {
        self.on_rollback
            .as_deref()
            .map(|name| Policy::from_name(name).map_err(|error| format!("--on-rollback: {error}")))
            .transpose()
    }
}

/// The public-id codec from `CLOCKFLAKE_PUBLIC_KEY_FILE` (a path) or `CLOCKFLAKE_PUBLIC_KEY`
/// (the keys themselves); `None` when neither is set.
pub fn public_ids_from_env() -> Result<Option<PublicIds>, String> {
    let file = std::env::var_os("CLOCKFLAKE_PUBLIC_KEY_FILE");
    let inline = std::env::var("CLOCKFLAKE_PUBLIC_KEY").ok();
    match (file, inline) {
        (Some(_), Some(_)) => {
            Err("set CLOCKFLAKE_PUBLIC_KEY_FILE or CLOCKFLAKE_PUBLIC_KEY, not both".to_owned())
        }
        (Some(path), None) => {
            let text = std::fs::read_to_string(&path).map_err(|error| {
                format!(
                    "CLOCKFLAKE_PUBLIC_KEY_FILE: cannot read {}: {error}",
                    path.to_string_lossy()
                )
            })?;
            parse_keys(&text)
                .map(Some)
                .map_err(|error| format!("CLOCKFLAKE_PUBLIC_KEY_FILE: {error}"))
        }
        (None, Some(text)) => parse_keys(&text)
            .map(Some)
            .map_err(|error| format!("CLOCKFLAKE_PUBLIC_KEY: {error}")),
        (None, None) => Ok(None),
    }
}

/// Keys as `VERSION:HEX` entries (32 hex digits, 16 bytes), separated by commas, spaces or
/// newlines; the first is the current key, the others old keys kept for decoding. Messages
/// never repeat a key.
pub fn parse_keys(text: &str) -> Result<PublicIds, String> {
    let mut codec: Option<PublicIds> = None;
    let entries = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|entry| !entry.is_empty());
    for (index, entry) in entries.enumerate() {
        let (version, hex) = entry.split_once(':').ok_or_else(|| {
            format!(
                "entry {}: expected VERSION:HEX (e.g. 1:<32 hex digits>)",
                index + 1
            )
        })?;
        let version: u8 = version
            .parse()
            .map_err(|_| format!("entry {}: expected a key version 0..=31", index + 1))?;
        let key = parse_hex_key(hex)
            .ok_or_else(|| format!("entry {}: expected 32 hex digits (16 bytes)", index + 1))?;
        codec = Some(
            match codec {
                None => PublicIds::new(version, key),
                Some(codec) => codec.with_old_key(version, key),
            }
            .map_err(|error| format!("entry {}: {error}", index + 1))?,
        );
    }
    codec.ok_or_else(|| "expected at least one VERSION:HEX key".to_owned())
}

fn parse_hex_key(hex: &str) -> Option<[u8; 16]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 32 {
        return None;
    }
    let mut key = [0u8; 16];
    for (byte, pair) in key.iter_mut().zip(bytes.chunks_exact(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(text, 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    const HEX: &str = "000102030405060708090a0b0c0d0e0f";

    #[test]
    fn keys_parse_with_rotation() {
        let codec = parse_keys(&format!("2:{HEX}\n1:{}", "ff".repeat(16))).unwrap();
        assert_eq!(codec.current_version(), 2);
        let text = codec.encode_text(12345).unwrap();
        assert_eq!(codec.decode_text(text.as_str()).unwrap(), 12345);
    }

    #[test]
    fn bad_keys_are_refused_without_echoing_them() {
        for bad in [
            "",
            "1",
            "x:00",
            "1:0011",
            "40:000102030405060708090a0b0c0d0e0f",
            "1:zz0102030405060708090a0b0c0d0e0f",
            "1:é0102030405060708090a0b0c0d0e0",
        ] {
            let error = parse_keys(bad).unwrap_err();
            assert!(!error.contains("0102030405"), "{error}");
        }
        let duplicate = parse_keys(&format!("1:{HEX},1:{HEX}")).unwrap_err();
        assert!(duplicate.contains("key version"), "{duplicate}");
    }
}
