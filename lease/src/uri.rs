//! Coordinator URIs: `file:///DIR?app=NAME` and `postgres://...?app=NAME&ttl=10s`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::time::Duration;

use crate::file::FileCoordinator;
use crate::pg::PostgresCoordinator;
use crate::{Coordinator, LeaseError};

/// The default application namespace when the URI names none.
pub const DEFAULT_APP: &str = "default";
/// The default lease TTL of `postgres://`.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);
/// The default reservation of `file://`: how far ahead of the clock the state record is kept.
pub const DEFAULT_RESERVE: Duration = Duration::from_secs(1);
/// The default table of `postgres://`.
pub const DEFAULT_TABLE: &str = "clockflake_leases";

/// What a URI asks for.
pub(crate) struct Target {
    pub coordinator: Box<dyn Coordinator>,
    /// How far ahead the state record is reserved.
    pub reserve: Duration,
}

pub(crate) fn invalid(uri: &str, reason: impl Into<String>) -> LeaseError {
    LeaseError::InvalidUri {
        uri: redact(uri),
        reason: reason.into(),
    }
}

/// The URI with the password of its user info replaced by `***`.
pub fn redact(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) if user_info.contains(':') => {
            let user = user_info.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}{tail}")
        }
        _ => uri.to_owned(),
    }
}

/// `10s`, `1500ms`, `2m`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let (number, unit_ms) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60_000)
    } else {
        (text, 1000)
    };
    let value: u64 = number.parse().ok()?;
    value.checked_mul(unit_ms).map(Duration::from_millis)
}

/// An app name or a ZooKeeper path segment: 1 to 64 of `A-Z a-z 0-9 _ - .`, not starting
/// with `.` (safe as a file name, a table key and a znode name alike).
pub(crate) fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && !text.starts_with('.')
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

fn check_app(uri: &str, app: &str) -> Result<(), LeaseError> {
    if is_name(app) {
        Ok(())
    } else {
        Err(invalid(
            uri,
            format!(
                "app must be 1 to 64 of A-Z a-z 0-9 _ - . (not starting with '.'), found {app:?}"
            ),
        ))
    }
}

pub(crate) fn percent_decode(uri: &str, text: &str) -> Result<String, LeaseError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| invalid(uri, "a '%' not followed by two hex digits"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid(uri, "percent-encoding that is not UTF-8"))
}

/// A token naming this holder in the coordinator: host, process and a random part.
pub fn owner_token() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "host".to_owned());
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    let first = hasher.finish();
    hasher.write_u64(first);
    format!(
        "{host}/{}/{first:016x}{:016x}",
        std::process::id(),
        hasher.finish()
    )
}

pub(crate) fn connect(uri: &str) -> Result<Target, LeaseError> {
    let (scheme, _) = uri
        .split_once("://")
        .ok_or_else(|| invalid(uri, "no scheme"))?;
    if scheme == "zookeeper" {
        let (coordinator, ttl) = crate::zookeeper::target(uri)?;
        return Ok(Target {
            coordinator,
            reserve: ttl,
        });
    }
    let (base, query) = uri.split_once('?').unwrap_or((uri, ""));
    let mut app = DEFAULT_APP.to_owned();
    let mut ttl = None;
    let mut reserve = None;
    let mut table = None;
    let mut write_delay = None;
    let mut passthrough = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(uri, value)?;
        let duration = |name: &str| {
            parse_duration(&value)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| invalid(uri, format!("{name} must look like 10s, 1500ms or 2m")))
        };
        match key {
            "app" => app = value,
            "ttl" => ttl = Some(duration("ttl")?),
            "reserve" => reserve = Some(duration("reserve")?),
            "table" => table = Some(value),
            "debug_write_delay" => write_delay = Some(duration("debug_write_delay")?),
            _ => passthrough.push(pair),
        }
    }
    check_app(uri, &app)?;
    match scheme {
        "file" => {
            if let Some(key) = passthrough.first() {
                return Err(invalid(
                    uri,
                    format!("unknown parameter {key:?} for file://"),
                ));
            }
            if ttl.is_some() || table.is_some() {
                return Err(invalid(
                    uri,
                    "ttl and table are postgres:// parameters (file locks last until released)",
                ));
            }
            let path = base.strip_prefix("file://").unwrap_or("");
            let path = path.strip_prefix("localhost").unwrap_or(path);
            if !path.starts_with('/') {
                return Err(invalid(uri, "expected an absolute path: file:///DIR"));
            }
            let reserve = reserve.unwrap_or(DEFAULT_RESERVE);
            if reserve < Duration::from_millis(10) {
                return Err(invalid(uri, "reserve must be at least 10ms"));
            }
            let mut coordinator =
                FileCoordinator::new(PathBuf::from(percent_decode(uri, path)?), &app)?;
            coordinator.set_write_delay(write_delay);
            Ok(Target {
                coordinator: Box::new(coordinator),
                reserve,
            })
        }
        "postgres" | "postgresql" => {
            if reserve.is_some() || write_delay.is_some() {
                return Err(invalid(
                    uri,
                    "postgres:// reserves state up to the lease deadline: set ttl, not reserve",
                ));
            }
            let ttl = ttl.unwrap_or(DEFAULT_TTL);
            if ttl < Duration::from_millis(200) || ttl > Duration::from_secs(86_400) {
                return Err(invalid(uri, "ttl must be between 200ms and 1 day"));
            }
            let table = table.unwrap_or_else(|| DEFAULT_TABLE.to_owned());
            let table_ok = table.len() <= 63
                && table.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                && table
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !table_ok {
                return Err(invalid(
                    uri,
                    format!("table must be a lowercase SQL identifier, found {table:?}"),
                ));
            }
            let rest = if passthrough.is_empty() {
                base.to_owned()
            } else {
                format!("{base}?{}", passthrough.join("&"))
            };
            let config: postgres::Config = rest
                .parse()
                .map_err(|error| invalid(uri, format!("{error}")))?;
            let describe = redact(&format!("{base}?app={app}"));
            Ok(Target {
                coordinator: Box::new(PostgresCoordinator::new(
                    config,
                    describe,
                    &table,
                    &app,
                    ttl,
                    owner_token(),
                )),
                reserve: ttl,
            })
        }
        other => Err(invalid(
            uri,
            format!("unknown scheme {other:?}: expected file, postgres or zookeeper"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(uri: &str) -> &'static str {
        match connect(uri) {
            Ok(_) => "OK",
            Err(error) => error.code(),
        }
    }

    #[test]
    fn bad_uris_are_refused_with_invalid_uri() {
        for uri in [
            "",
            "orders",
            "ftp://x/y",
            "file://relative/dir",
            "file:///tmp/x?app=",
            "file:///tmp/x?app=../etc",
            "file:///tmp/x?app=a/b",
            "file:///tmp/x?ttl=10s",
            "file:///tmp/x?reserve=abc",
            "file:///tmp/x?reserve=1ms",
            "file:///tmp/x?bogus=1",
            "postgres://u@127.0.0.1/db?ttl=0s",
            "postgres://u@127.0.0.1/db?ttl=100ms",
            "postgres://u@127.0.0.1/db?table=Robert');DROP",
            "postgres://u@127.0.0.1/db?reserve=1s",
            "postgres://u@127.0.0.1/db?nonsense_param=1",
        ] {
            assert_eq!(code(uri), "INVALID_URI", "{uri}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("1500ms"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_duration("1.5s"), None);
        assert_eq!(parse_duration("-1s"), None);
    }

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("postgres://me:secret@db:5432/x?app=a"),
            "postgres://me:***@db:5432/x?app=a"
        );
        let error = connect("postgres://me:secret@db/x?ttl=bad")
            .err()
            .map(|e| e.to_string());
        assert!(!error.unwrap_or_default().contains("secret"));
    }
}
