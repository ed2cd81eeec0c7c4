//! Flags and environment variables, and the public-id keys (environment or file only).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use clockflake::{Field, Layout, Policy, PublicIds};

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
    /// Where the worker id is leased from: file:///DIR?app=NAME (one host),
    /// postgres://USER@HOST:PORT/DB?app=NAME&ttl=10s (or postgresql://),
    /// redis://[USER:PASSWORD@]HOST:PORT/DB?app=NAME&ttl=10s (or rediss:// for TLS),
    /// zookeeper://HOST:PORT/snowflake/APP?ttl=10s,
    /// etcd://HOST:PORT[,HOST:PORT...]/?app=NAME&ttl=10s (or etcds:// for TLS),
    /// k8s:///DIR?app=NAME (a StatefulSet pod's ordinal) or env:///DIR?app=NAME
    /// (CLOCKFLAKE_WORKER_ID). Prefer the environment variable
    /// when the URI carries a password. Every scheme takes workers=LO-HI: lease only worker ids
    /// in that range (one range per region, each on its own coordinator).
    #[arg(long, env = "CLOCKFLAKE_LEASE", hide_env_values = true)]
    pub lease: String,

    /// Address to listen on.
    #[arg(long, env = "CLOCKFLAKE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Layout: a preset (clockseq, twitter, discord, sonyflake, baidu, js53) or a custom one,
    /// FIELD:BITS,...;unit=DURATION;epoch=TIME with the fields from the most significant bit
    /// (timestamp first; clock_seq and worker may be left out), e.g.
    /// 'timestamp:41,clock_seq:3,worker:7,sequence:12;unit=1ms;epoch=2024-01-01T00:00:00Z'
    /// (unit defaults to 1ms; epoch is Unix ms or a UTC date or time).
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

    /// TLS: the certificate chain (PEM) to serve HTTPS with; needs --tls-key.
    #[arg(long, env = "CLOCKFLAKE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// TLS: the private key (PEM: PKCS#8, PKCS#1 or SEC1) for --tls-cert.
    #[arg(long, env = "CLOCKFLAKE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,

    /// Threads that serve requests (0: one per CPU this process may run on).
    #[arg(long, env = "CLOCKFLAKE_THREADS", default_value_t = 0)]
    pub threads: usize,

    /// Benchmarks only: also serve `GET /bench/constant`, a handler returning a constant.
    #[arg(long, hide = true)]
    pub bench_constant_route: bool,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    clockflake_lease::parse_duration(text)
        .ok_or_else(|| format!("expected a duration such as 250ms, 10s or 2m, found {text:?}"))
}

impl Config {
    /// The layout named or described by `--layout`.
    pub fn layout(&self) -> Result<Layout, String> {
        parse_layout(&self.layout).map_err(|error| format!("--layout: {error}"))
    }

    /// The rollback policy named by `--on-rollback`, if any.
    pub fn policy(&self) -> Result<Option<Policy>, String> {
        self.on_rollback
            .as_deref()
            .map(|name| Policy::from_name(name).map_err(|error| format!("--on-rollback: {error}")))
            .transpose()
    }
}

/// A preset name, or a custom layout `FIELD:BITS,...;unit=DURATION;epoch=TIME`, checked by
/// core's `Layout::new` (widths, order, lifetime). Parts after the fields may come in any order.
pub fn parse_layout(text: &str) -> Result<Layout, String> {
    let text = text.trim();
    if !text.contains(':') {
        return Layout::by_name(text).map_err(|error| error.to_string());
    }
    let mut parts = text.split(';').map(str::trim);
    let mut fields = Vec::new();
    for item in parts.next().unwrap_or("").split(',').map(str::trim) {
        let (name, bits) = item
            .split_once(':')
            .ok_or_else(|| format!("expected FIELD:BITS, found {item:?}"))?;
        let field = Field::from_name(name.trim()).map_err(|error| error.to_string())?;
        let bits: u32 = bits
            .trim()
            .parse()
            .map_err(|_| format!("expected a width in bits for {name}, found {bits:?}"))?;
        fields.push((field, bits));
    }
    let mut unit_ms = 1;
    let mut epoch_ms = None;
    for part in parts.filter(|part| !part.is_empty()) {
        match part.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
            Some(("unit", value)) => {
                unit_ms = clockflake_lease::parse_duration(value)
                    .and_then(|unit| u64::try_from(unit.as_millis()).ok())
                    .filter(|ms| *ms > 0)
                    .ok_or_else(|| {
                        format!(
                            "unit: expected a duration such as 1ms, 10ms or 1s, found {value:?}"
                        )
                    })?;
            }
            Some(("epoch", value)) => {
                epoch_ms = Some(parse_time_ms(value).ok_or_else(|| {
                    format!("epoch: expected Unix ms, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS[.mmm]Z, found {value:?}")
                })?);
            }
            _ => {
                return Err(format!(
                    "expected unit=DURATION or epoch=TIME, found {part:?}"
                ))
            }
        }
    }
    let epoch_ms = epoch_ms.ok_or("a custom layout needs epoch=TIME")?;
    Layout::new(&fields, unit_ms, epoch_ms).map_err(|error| error.to_string())
}

/// Unix ms from digits, `YYYY-MM-DD`, or `YYYY-MM-DDTHH:MM:SS[.mmm]Z` (UTC).
fn parse_time_ms(text: &str) -> Option<u64> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok();
    }
    let number = |range: std::ops::Range<usize>| -> Option<u64> {
        let part = text.get(range)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let bytes = text.as_bytes();
    if bytes.len() < 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let mut ms_of_day = 0;
    if bytes.len() > 10 {
        let rest = text.get(10..)?;
        let (clock, millis) = match rest.strip_suffix('Z')?.split_once('.') {
            Some((clock, millis)) if millis.len() == 3 => (clock, number(20..23)?),
            Some(_) => return None,
            None => (rest.strip_suffix('Z')?, 0),
        };
        if clock.len() != 9 || bytes[10] != b'T' || bytes[13] != b':' || bytes[16] != b':' {
            return None;
        }
        let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
        if hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        ms_of_day = ((hour * 60 + minute) * 60 + second) * 1000 + millis;
    }
    if !(1..=12).contains(&month) || !(1..=days_in_month(year, month)).contains(&day) {
        return None;
    }
    Some(days_from_civil(year, month, day)? * 86_400_000 + ms_of_day)
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date from 1970 on (Howard Hinnant's days_from_civil).
fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    let year = if month <= 2 {
        year.checked_sub(1)?
    } else {
        year
    };
    let era = year / 400;
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).checked_sub(719_468)
}

/// The bearer token the public-id routes require, from `CLOCKFLAKE_PUBLIC_TOKEN_FILE` (a path)
/// or `CLOCKFLAKE_PUBLIC_TOKEN`; `None` when neither is set. Surrounding whitespace is
/// trimmed; at least 16 characters. Messages never repeat it.
pub fn public_token_from_env() -> Result<Option<String>, String> {
    let file = std::env::var_os("CLOCKFLAKE_PUBLIC_TOKEN_FILE");
    let inline = std::env::var("CLOCKFLAKE_PUBLIC_TOKEN").ok();
    let (name, text) = match (file, inline) {
        (Some(_), Some(_)) => {
            return Err(
                "set CLOCKFLAKE_PUBLIC_TOKEN_FILE or CLOCKFLAKE_PUBLIC_TOKEN, not both".to_owned(),
            )
        }
        (Some(path), None) => (
            "CLOCKFLAKE_PUBLIC_TOKEN_FILE",
            std::fs::read_to_string(&path).map_err(|error| {
                format!(
                    "CLOCKFLAKE_PUBLIC_TOKEN_FILE: cannot read {}: {error}",
                    path.to_string_lossy()
                )
            })?,
        ),
        (None, Some(text)) => ("CLOCKFLAKE_PUBLIC_TOKEN", text),
        (None, None) => return Ok(None),
    };
    let token = text.trim();
    if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "{name}: expected at least 16 printable ASCII characters with no spaces"
        ));
    }
    Ok(Some(token.to_owned()))
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
/// newlines; the first is the current key, the others old keys kept for decoding. A key whose
/// public ids were issued before FF1 (clockflake 0.1) is written `VERSION:legacy:HEX`, so that
/// its texts keep decoding. Messages never repeat a key.
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
        let (legacy, hex) = match hex.strip_prefix("legacy:") {
            Some(hex) => (true, hex),
            None => (false, hex),
        };
        let key = parse_hex_key(hex)
            .ok_or_else(|| format!("entry {}: expected 32 hex digits (16 bytes)", index + 1))?;
        codec = Some(
            match (codec, legacy) {
                (None, false) => PublicIds::new(version, key),
                (None, true) => PublicIds::legacy(version, key),
                (Some(codec), false) => codec.with_old_key(version, key),
                (Some(codec), true) => codec.with_legacy_key(version, key),
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

    /// `VERSION:legacy:HEX` keeps a key of the construction before FF1: its texts decode.
    #[test]
    fn legacy_keys_keep_decoding_their_texts() {
        let key = *b"clockflake-key-1";
        let old_text = PublicIds::legacy(1, key).unwrap().encode_text(42).unwrap();
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let codec = parse_keys(&format!("2:{HEX}, 1:legacy:{hex}")).unwrap();
        assert_eq!(codec.decode_text(old_text.as_str()).unwrap(), 42);
        assert_eq!(codec.is_legacy(1), Some(true));
        assert_eq!(codec.is_legacy(2), Some(false));
        let current = parse_keys(&format!("1:legacy:{hex}")).unwrap();
        assert_eq!(current.encode_text(42).unwrap(), old_text);
        let error = parse_keys("1:legacy:zz").unwrap_err();
        assert!(
            error.contains("32 hex digits") && !error.contains("zz"),
            "{error}"
        );
    }

    /// `--help` for `--lease` names every scheme the lease crate accepts with the features this
    /// crate builds it with (clockflake-lease's `uri::connect`: postgres, zookeeper, redis,
    /// etcd and k8s, besides file and env).
    #[test]
    fn lease_help_names_every_scheme() {
        use clap::CommandFactory;
        let command = Config::command();
        let lease = command
            .get_arguments()
            .find(|argument| argument.get_id() == "lease")
            .expect("--lease");
        let help = lease.get_help().expect("help").to_string();
        let schemes = "file postgres postgresql redis rediss zookeeper etcd etcds k8s env";
        for scheme in schemes.split(' ') {
            let uri = format!("{scheme}://");
            assert!(help.contains(&uri), "{uri} not in: {help}");
        }
    }

    #[test]
    fn layouts_by_name_and_by_spec() {
        assert_eq!(parse_layout("twitter").unwrap(), Layout::TWITTER);
        let spec =
            "timestamp:41,clock_seq:3,worker:7,sequence:12;unit=1ms;epoch=2024-01-01T00:00:00Z";
        assert_eq!(parse_layout(spec).unwrap(), Layout::CLOCKSEQ);
        let spec = "timestamp:41, clock_seq:3, worker:7, sequence:12; epoch=1704067200000";
        assert_eq!(parse_layout(spec).unwrap(), Layout::CLOCKSEQ);
        let spec = "timestamp:39,sequence:8,worker:16;unit=10ms;epoch=2014-09-01";
        assert_eq!(parse_layout(spec).unwrap(), Layout::SONYFLAKE);
        let spec = "timestamp:33,worker:4,sequence:15;unit=1s;epoch=2024-01-01T00:00:00.000Z";
        assert_eq!(parse_layout(spec).unwrap(), Layout::JS53);
        assert_eq!(
            parse_time_ms("2000-02-29T12:34:56.789Z"),
            Some(951_827_696_789)
        );
        for bad in [
            "nope",
            "timestamp:41,worker:7;epoch=0",
            "timestamp:41,worker:7,sequence:12",
            "timestamp:41,worker:7,sequence:12;epoch=2023-02-29",
            "timestamp:41,worker:7,sequence:12;epoch=2024-01-01T24:00:00Z",
            "timestamp:41,worker:7,sequence:12;epoch=0;unit=0ms",
            "timestamp:41,worker:7,sequence:12;epoch=0;unit=1500us",
            "timestamp:41,worker:7,sequence:16;epoch=0",
            "timestamp:41,worker:x,sequence:12;epoch=0",
            "timestamp:41,nodes:7,sequence:12;epoch=0",
            "timestamp:41,worker:7,sequence:12;epoch=0;colour=blue",
        ] {
            assert!(parse_layout(bad).is_err(), "{bad}");
        }
    }

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
