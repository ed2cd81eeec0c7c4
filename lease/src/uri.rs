//! Coordinator URIs: `file:///DIR?app=NAME`, `postgres://...?app=NAME&ttl=10s` and
//! `zookeeper://HOST:PORT[,HOST:PORT...]/PATH?ttl=10s`, all taken apart by one parser ([`parse`],
//! the `url` crate), and [`redact`], which shows a URI without its secrets.
//!
//! Secrets never reach a message: a password is taken from the user info or from a query
//! parameter whose name contains `pass`, `secret` or `token`; [`redact`] drops both, and
//! every reason that could echo a part of the URI is scrubbed of them ([`invalid`]). A URI
//! the parser refuses is shown without anything before its last `@` (where a password with an
//! unencoded `/`, `?` or `#` would be) and without its fragment.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use percent_encoding::{percent_decode_str, percent_encode, AsciiSet, NON_ALPHANUMERIC};
use url::Url;

use crate::file::{FileCoordinator, Sharing};
use crate::pg::{PgTls, PostgresCoordinator, SslMode};
use crate::{Coordinator, LeaseError};

/// The default application namespace when the URI names none.
pub const DEFAULT_APP: &str = "default";
/// The default lease TTL of `postgres://`.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);
/// The default reservation of `file://`: how far ahead of the clock the state record is kept.
pub const DEFAULT_RESERVE: Duration = Duration::from_secs(1);
/// The default table of `postgres://`.
pub const DEFAULT_TABLE: &str = "clockflake_leases";

/// Stands for a host list (`zk1:2181,zk2:2181`) while the rest of the URI is parsed: `url`
/// takes one host per URI, so each host of a list is parsed on its own.
const HOST_LIST: &str = "host-list.invalid";

/// What a URI asks for.
pub(crate) struct Target {
    pub coordinator: Box<dyn Coordinator>,
    /// How far ahead the state record is reserved.
    pub reserve: Duration,
}

/// A coordinator URI taken apart.
pub(crate) struct Parts {
    /// Lowercase.
    pub scheme: String,
    /// The URI as `url` parsed it (for a host list, with [`HOST_LIST`] as its host).
    pub url: Url,
    /// Each host (IPv6 in brackets, as written) and its port, if any.
    pub hosts: Vec<(String, Option<u16>)>,
    /// The query's parameters, percent-decoded, in order.
    pub query: Vec<(String, String)>,
}

impl Parts {
    /// The user name, percent-decoded.
    pub fn user(&self) -> String {
        String::from_utf8_lossy(&decode_lenient(self.url.username())).into_owned()
    }

    /// The password of the user info, percent-decoded.
    pub fn password(&self) -> Option<Vec<u8>> {
        self.url.password().map(decode_lenient)
    }

    /// `scheme://[user@]hosts` and the path as written: no password, no query.
    pub fn base(&self) -> String {
        let user = match self.url.username() {
            "" => String::new(),
            user => format!("{user}@"),
        };
        format!(
            "{}://{user}{}{}",
            self.scheme,
            self.host_list(),
            self.url.path()
        )
    }

    /// The hosts as written: `host[:port],...`.
    pub fn host_list(&self) -> String {
        self.hosts
            .iter()
            .map(|(host, port)| match port {
                Some(port) => format!("{host}:{port}"),
                None => host.clone(),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The URI without its secrets: the password of the user info as `***`, the values of
    /// secret parameters as `***`.
    fn redacted(&self) -> String {
        let user = match (self.url.username(), self.url.password()) {
            ("", None) => String::new(),
            (user, None) => format!("{user}@"),
            (user, Some(_)) => format!("{user}:***@"),
        };
        let mut text = format!(
            "{}://{user}{}{}",
            self.scheme,
            self.host_list(),
            self.url.path()
        );
        if let Some(query) = self.url.query() {
            text.push('?');
            text.push_str(&redact_query(query));
        }
        text
    }
}

/// Whether a query parameter holds a secret (`password`, `sslpassword`, `token`, ...).
fn is_secret_key(key: &str) -> bool {
    let key = String::from_utf8_lossy(&decode_lenient(key)).to_ascii_lowercase();
    ["pass", "secret", "token"]
        .iter()
        .any(|word| key.contains(word))
}

/// A query with the values of its secret parameters replaced by `***`.
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if is_secret_key(key) => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn is_scheme(text: &str) -> bool {
    text.starts_with(|c: char| c.is_ascii_alphabetic())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// Parses `uri` with the `url` crate, for every scheme. Errors are reasons that echo no part
/// of the URI.
fn split(uri: &str) -> Result<Parts, String> {
    let Some((scheme, rest)) = uri.split_once("://").filter(|(s, _)| is_scheme(s)) else {
        return Err("expected SCHEME://...".to_owned());
    };
    let scheme = scheme.to_ascii_lowercase();
    if rest.contains('#') {
        return Err("a '#': coordinator URIs take no fragment (in a password, write %23)".into());
    }
    // The authority ends at the first '/' or '?' (RFC 3986). A password written with an
    // unencoded '/' or '?' would continue past it, up to an '@': refuse any '@' there.
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, after) = rest.split_at(authority_end);
    if after.contains('@') {
        return Err(
            "an '@' after the host: percent-encode '@', '/', '?' and '#' in a user name, \
             password or parameter (%40, %2F, %3F, %23)"
                .into(),
        );
    }
    let (user_info, host_text) = match authority.rsplit_once('@') {
        Some((user_info, hosts)) => (Some(user_info), hosts),
        None => (None, authority),
    };
    if user_info.is_some() && matches!(scheme.as_str(), "file" | "zookeeper") {
        return Err(format!("{scheme}:// takes no user name or password"));
    }
    let host_list = host_text.contains(',');
    let url = if host_list {
        let user_info = user_info.map_or_else(String::new, |u| format!("{u}@"));
        Url::parse(&format!("{scheme}://{user_info}{HOST_LIST}{after}"))
    } else {
        Url::parse(uri)
    }
    .map_err(|error| format!("{error}"))?;
    let hosts = if host_list {
        let mut hosts = Vec::new();
        for entry in host_text.split(',') {
            let one = Url::parse(&format!("{scheme}://{entry}"))
                .map_err(|error| format!("{error} in the host list"))?;
            match one.host_str() {
                Some(host) if !host.is_empty() => hosts.push((host.to_owned(), one.port())),
                _ => return Err("an empty host in the host list".into()),
            }
        }
        hosts
    } else {
        url.host_str()
            .filter(|host| !host.is_empty())
            .map(|host| vec![(host.to_owned(), url.port())])
            .unwrap_or_default()
    };
    let mut query = Vec::new();
    for pair in url
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        query.push((percent_decode(key)?, percent_decode(value)?));
    }
    Ok(Parts {
        scheme,
        url,
        hosts,
        query,
    })
}

/// Parses `uri` (see [`split`]); a refusal is `INVALID_URI` with the URI redacted.
pub(crate) fn parse(uri: &str) -> Result<Parts, LeaseError> {
    split(uri).map_err(|reason| invalid(uri, reason))
}

pub(crate) fn invalid(uri: &str, reason: impl Into<String>) -> LeaseError {
    LeaseError::InvalidUri {
        uri: redact(uri),
        reason: scrub(&reason.into(), &secrets_of(uri)),
    }
}

/// The URI without its secrets: the password of its user info and the values of secret
/// query parameters (`password`, `sslpassword`, ...) become `***`. A URI the parser refuses is
/// shown without anything up to its last `@` and without its fragment, so a password with
/// unencoded `/`, `?`, `#` or `@` in it is dropped too.
pub fn redact(uri: &str) -> String {
    if let Ok(parts) = split(uri) {
        return parts.redacted();
    }
    let (scheme, rest) = match uri.split_once("://").filter(|(s, _)| is_scheme(s)) {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), uri),
    };
    let rest = match rest.rfind('@') {
        Some(at) => format!("***@{}", &rest[at + 1..]),
        None => rest.to_owned(),
    };
    let rest = rest.split('#').next().unwrap_or("");
    match rest.split_once('?') {
        Some((before, query)) => format!("{scheme}{before}?{}", redact_query(query)),
        None => format!("{scheme}{rest}"),
    }
}

/// Every secret `uri` may hold, as written and percent-decoded: the password of the user
/// info (as the parser sees it, and everything after the first ':' up to the last '@'), and
/// the values of secret parameters.
fn secrets_of(uri: &str) -> Vec<String> {
    let mut secrets = Vec::new();
    let mut add = |raw: &str| {
        secrets.push(raw.to_owned());
        secrets.push(String::from_utf8_lossy(&decode_lenient(raw)).into_owned());
    };
    let rest = uri.split_once("://").map_or(uri, |(_, rest)| rest);
    if let Some((user_info, _)) = rest.rsplit_once('@') {
        add(user_info);
        if let Some((_, password)) = user_info.split_once(':') {
            add(password);
        }
    }
    if let Ok(parts) = split(uri) {
        if let Some(password) = parts.url.password() {
            add(password);
        }
    }
    for query in rest.split('?').skip(1) {
        for pair in query.split(['&', '#']) {
            if let Some((key, value)) = pair.split_once('=') {
                if is_secret_key(key) {
                    add(value);
                }
            }
        }
    }
    secrets
}

/// `text` with every secret of `secrets` (at least 3 bytes long; ASCII case ignored, for
/// percent-encodings) replaced by `***`.
pub(crate) fn scrub(text: &str, secrets: &[String]) -> String {
    let mut secrets: Vec<&String> = secrets.iter().filter(|s| s.len() >= 3).collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut text = text.to_owned();
    for secret in secrets {
        let needle = secret.to_ascii_lowercase();
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.to_ascii_lowercase().find(&needle) {
            // ASCII lowercasing keeps byte offsets, and `needle` starts and ends where a
            // match of the same bytes does, so both cuts fall on char boundaries.
            out.push_str(&rest[..at]);
            out.push_str("***");
            rest = &rest[at + needle.len()..];
        }
        out.push_str(rest);
        text = out;
    }
    text
}

/// `password` (bytes, as a connection config holds it) as written and percent-encoded
/// (everything but the unreserved `A-Z a-z 0-9 - . _ ~`).
pub(crate) fn password_forms(password: &[u8]) -> Vec<String> {
    const RESERVED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    vec![
        String::from_utf8_lossy(password).into_owned(),
        percent_encode(password, RESERVED).to_string(),
    ]
}

/// Percent-decoding that keeps a '%' not followed by two hex digits as it is (as PostgreSQL
/// clients read passwords).
fn decode_lenient(text: &str) -> Vec<u8> {
    percent_decode_str(text).collect()
}

/// Strict percent-decoding to UTF-8 (query parameters, paths). The error echoes nothing.
pub(crate) fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let well_formed = bytes.iter().enumerate().all(|(i, &byte)| {
        byte != b'%'
            || bytes
                .get(i + 1..i + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return Err("a '%' not followed by two hex digits".to_owned());
    }
    String::from_utf8(decode_lenient(text))
        .map_err(|_| "percent-encoding that is not UTF-8".to_owned())
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
    let scheme = uri
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("redis" | "rediss") => return redis_target(uri),
        Some("zookeeper") => {
            let (coordinator, ttl) = crate::zookeeper::target(uri)?;
            return Ok(Target {
                coordinator,
                reserve: ttl,
            });
        }
        Some("file" | "postgres" | "postgresql" | "k8s" | "env") => {}
        Some(other) if is_scheme(other) => {
            return Err(invalid(
                uri,
                format!(
                    "unknown scheme {other:?}: expected file, postgres, redis, zookeeper, \
                     k8s or env"
                ),
            ))
        }
        _ => return Err(invalid(uri, "no scheme")),
    }
    // k8s:///DIR and env:///DIR are file:///DIR with the worker id assigned from outside.
    let assigned_scheme = match scheme.as_deref() {
        Some("k8s") => Some("k8s"),
        Some("env") => Some("env"),
        _ => None,
    };
    let file_like = assigned_scheme.map(|_| {
        let rest = uri.split_once("://").map_or("", |(_, rest)| rest);
        format!("file://{rest}")
    });
    let parts = parse(file_like.as_deref().unwrap_or(uri))?;
    let mut app = DEFAULT_APP.to_owned();
    let mut ttl = None;
    let mut reserve = None;
    let mut table = None;
    let mut write_delay = None;
    let mut passthrough = Vec::new();
    for (key, value) in &parts.query {
        let duration = |name: &str| {
            parse_duration(value)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| invalid(uri, format!("{name} must look like 10s, 1500ms or 2m")))
        };
        match key.as_str() {
            "app" => app = value.clone(),
            "ttl" => ttl = Some(duration("ttl")?),
            "reserve" => reserve = Some(duration("reserve")?),
            "table" => table = Some(value.clone()),
            "debug_write_delay" => write_delay = Some(duration("debug_write_delay")?),
            _ => passthrough.push((key.as_str(), value.as_str())),
        }
    }
    check_app(uri, &app)?;
    if parts.scheme == "file" {
        // mode=private (default: 0700 directories, 0600 files) or mode=group (0770, 0660).
        let sharing = match passthrough.iter().find(|(key, _)| *key == "mode") {
            None | Some((_, "private")) => Sharing::Private,
            Some((_, "group")) => Sharing::Group,
            Some(_) => return Err(invalid(uri, "mode must be private or group")),
        };
        passthrough.retain(|(key, _)| *key != "mode");
        if passthrough.iter().any(|(key, _)| *key == "max_skew") {
            return Err(invalid(
                uri,
                "max_skew is a postgres:// and zookeeper:// parameter: file:// has no clock \
                 apart from this host's to compare with",
            ));
        }
        if let Some((key, _)) = passthrough.first() {
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
        // `url` reads file://localhost/DIR as file:///DIR; any other host is not this one.
        let path = parts
            .url
            .to_file_path()
            .ok()
            .filter(|_| parts.hosts.is_empty())
            .ok_or_else(|| invalid(uri, "expected an absolute path: file:///DIR"))?;
        let reserve = reserve.unwrap_or(DEFAULT_RESERVE);
        if reserve < Duration::from_millis(10) {
            return Err(invalid(uri, "reserve must be at least 10ms"));
        }
        let mut coordinator = match assigned_scheme {
            None => FileCoordinator::with_sharing(path, &app, sharing)?,
            Some(scheme) => {
                let assigned = if scheme == "k8s" {
                    let pod_index = std::env::var(crate::fixed::POD_INDEX_ENV).ok();
                    crate::fixed::pod_ordinal(
                        pod_index.as_deref(),
                        crate::fixed::hostname().as_deref(),
                    )
                } else {
                    let value = std::env::var(crate::fixed::WORKER_ID_ENV).ok();
                    crate::fixed::env_worker_id(value.as_deref())
                }
                .map_err(|reason| LeaseError::unavailable(&format!("{scheme}://"), reason))?;
                FileCoordinator::with_assigned(path, &app, sharing, assigned, scheme)?
            }
        };
        coordinator.set_write_delay(write_delay);
        return Ok(Target {
            coordinator: Box::new(coordinator),
            reserve,
        });
    }
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
    // sslmode and sslrootcert as libpq means them (the `postgres` crate knows three modes,
    // and no sslrootcert), and the start-up clock check's bound.
    let mut take = |name: &str| {
        let at = passthrough.iter().position(|(key, _)| *key == name)?;
        Some(passthrough.remove(at).1)
    };
    let sslmode = match take("sslmode") {
        None => SslMode::Prefer,
        Some(mode) => SslMode::parse(mode).ok_or_else(|| {
            invalid(
                uri,
                "sslmode must be disable, prefer, require, verify-ca or verify-full",
            )
        })?,
    };
    let sslrootcert = take("sslrootcert").map(std::path::Path::new);
    let tls = PgTls::new(sslmode, sslrootcert).map_err(|reason| invalid(uri, reason))?;
    let max_skew = match take("max_skew") {
        None => Some(crate::coordinator::DEFAULT_MAX_SKEW),
        Some(value) => crate::coordinator::parse_max_skew(uri, value)?,
    };
    let config = pg_config(uri, &parts, &passthrough)?;
    let describe = format!("{}?app={app}", parts.base());
    Ok(Target {
        coordinator: Box::new(
            PostgresCoordinator::new(config, describe, &table, &app, ttl, owner_token())
                .with_tls(tls)
                .with_max_skew(max_skew),
        ),
        reserve: ttl,
    })
}

/// The connection config of a `postgres://` URI, from the parts `url` found, with the same
/// meaning as libpq's URIs (parameters after the URI's own user, host, port and database;
/// a `password` parameter wins over the user info's). The password never passes through
/// text the `postgres` crate could echo.
fn pg_config(
    uri: &str,
    parts: &Parts,
    passthrough: &[(&str, &str)],
) -> Result<postgres::Config, LeaseError> {
    fn quoted(value: &str) -> String {
        format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
    }
    let mut settings = Vec::new();
    let user = parts.user();
    if !user.is_empty() {
        settings.push(format!("user={}", quoted(&user)));
    }
    if !parts.hosts.is_empty() {
        let mut hosts = Vec::new();
        let mut ports = Vec::new();
        for (host, port) in &parts.hosts {
            let host = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host);
            // A Unix socket directory is written percent-encoded: %2Fvar%2Frun%2Fpostgresql.
            hosts.push(percent_decode(host).map_err(|reason| invalid(uri, reason))?);
            ports.push(port.map_or_else(String::new, |p| p.to_string()));
        }
        settings.push(format!("host={}", quoted(&hosts.join(","))));
        settings.push(format!("port={}", quoted(&ports.join(","))));
    }
    let database = parts.url.path().trim_start_matches('/');
    if !database.is_empty() {
        let database = percent_decode(database).map_err(|reason| invalid(uri, reason))?;
        settings.push(format!("dbname={}", quoted(&database)));
    }
    for (key, value) in passthrough {
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(invalid(
                uri,
                format!("unknown parameter {key:?} for postgres://"),
            ));
        }
        settings.push(format!("{key}={}", quoted(value)));
    }
    let mut config: postgres::Config =
        settings
            .join(" ")
            .parse()
            .map_err(|error: postgres::Error| {
                // "invalid connection string" says little; its source names the option.
                let detail = std::error::Error::source(&error)
                    .map_or_else(String::new, |source| format!(": {source}"));
                invalid(uri, format!("{error}{detail}"))
            })?;
    if config.get_password().is_none() {
        if let Some(password) = parts.password() {
            config.password(password);
        }
    }
    if config.get_user().is_none() {
        return Err(invalid(
            uri,
            "no user name: expected postgres://USER@HOST:PORT/DB",
        ));
    }
    if config.get_hosts().is_empty() {
        return Err(invalid(
            uri,
            "no host: expected postgres://USER@HOST:PORT/DB",
        ));
    }
    Ok(config)
}

/// `redis://[USER:PASSWORD@]HOST[:PORT][/DB]?app=NAME&ttl=10s`, `rediss://` for TLS (with
/// `cacert=PATH`, a PEM file of the certificates to trust instead of the system's).
fn redis_target(uri: &str) -> Result<Target, LeaseError> {
    let parts = parse(uri)?;
    let tls = parts.scheme == "rediss";
    let mut app = DEFAULT_APP.to_owned();
    let mut ttl = DEFAULT_TTL;
    let mut cacert = None;
    let mut max_skew = Some(crate::coordinator::DEFAULT_MAX_SKEW);
    for (key, value) in &parts.query {
        match key.as_str() {
            "app" => app = value.clone(),
            "ttl" => {
                ttl = parse_duration(value)
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| invalid(uri, "ttl must look like 10s, 1500ms or 2m"))?
            }
            "max_skew" => max_skew = crate::coordinator::parse_max_skew(uri, value)?,
            "cacert" if tls => cacert = Some(value.clone()),
            "cacert" => return Err(invalid(uri, "cacert is a rediss:// (TLS) parameter")),
            _ => {
                return Err(invalid(
                    uri,
                    format!(
                        "unknown parameter {key:?} for {}:// (expected app, ttl, max_skew{})",
                        parts.scheme,
                        if tls { ", cacert" } else { "" }
                    ),
                ))
            }
        }
    }
    check_app(uri, &app)?;
    if ttl < Duration::from_millis(200) || ttl > Duration::from_secs(86_400) {
        return Err(invalid(uri, "ttl must be between 200ms and 1 day"));
    }
    let [(host, port)] = parts.hosts.as_slice() else {
        return Err(invalid(
            uri,
            "expected one host: redis://[USER:PASSWORD@]HOST:PORT/DB (a primary, not a list)",
        ));
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .to_owned();
    let db = match parts.url.path().trim_start_matches('/') {
        "" => 0,
        db => db
            .parse::<i64>()
            .ok()
            .filter(|db| *db >= 0)
            .ok_or_else(|| invalid(uri, "the path must be a database number: /0, /1, ..."))?,
    };
    let user = Some(parts.user()).filter(|user| !user.is_empty());
    let password = match parts.password() {
        Some(bytes) => Some(
            String::from_utf8(bytes)
                .map_err(|_| invalid(uri, "the password is not UTF-8 once percent-decoded"))?,
        ),
        None => None,
    };
    let cacert = match cacert {
        Some(path) => Some(
            std::fs::read(&path)
                .map_err(|error| invalid(uri, format!("cacert: cannot read {path:?}: {error}")))?,
        ),
        None => None,
    };
    let describe = format!("{}?app={app}", parts.base());
    let endpoint = crate::redis::Endpoint {
        host,
        port: port.unwrap_or(6379),
        db,
        user,
        password,
        tls,
        cacert,
    };
    let coordinator =
        crate::redis::RedisCoordinator::new(endpoint, describe, &app, ttl, owner_token())
            .map_err(|reason| invalid(uri, reason))?
            .with_max_skew(max_skew);
    Ok(Target {
        coordinator: Box::new(coordinator),
        reserve: ttl,
    })
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
            "postgres://u@127.0.0.1/db?sslmode=verify",
            "postgres://u@127.0.0.1/db?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem",
            "postgres://u@127.0.0.1/db?sslrootcert=system",
            "postgres://u@127.0.0.1/db?max_skew=soon",
            "postgres://u@127.0.0.1/db?max_skew=0s",
            "file:///tmp/x?max_skew=5s",
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
    fn one_parser_for_every_scheme() {
        let parts = parse("postgres://me:p%40ss@[::1]:5433,db2/x%20y?app=a&sslmode=disable")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parts.scheme, "postgres");
        assert_eq!(parts.user(), "me");
        assert_eq!(parts.password(), Some(b"p@ss".to_vec()));
        assert_eq!(parts.host_list(), "[::1]:5433,db2");
        assert_eq!(parts.base(), "postgres://me@[::1]:5433,db2/x%20y");
        assert_eq!(parts.query[1], ("sslmode".to_owned(), "disable".to_owned()));
        let parts = parse("zookeeper://zk1:2181,zk2/snowflake/a?ttl=2s").unwrap();
        assert_eq!(
            parts.hosts,
            [("zk1".to_owned(), Some(2181)), ("zk2".to_owned(), None)]
        );
        assert_eq!(parts.url.path(), "/snowflake/a");
        for bad in [
            "postgres://u:p/q@h/db",
            "postgres://u@h/db?x=a@b",
            "postgres://u@h/db#frag",
            "postgres://u@h:70000/db",
            "postgres://u@h1,,h2/db",
            "zookeeper://u@h:1/x",
            "file://u@/tmp/x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_connection_config_from_the_parts() {
        let config = |uri: &str| match connect(uri) {
            Err(error) => panic!("{error}"),
            Ok(target) => target.coordinator.describe(),
        };
        let shown = config("postgresql://me:s3cret@db:6543/orders?app=a&sslmode=disable");
        assert!(
            shown.contains("postgresql://me@db:6543/orders?app=a"),
            "{shown}"
        );
        assert!(!shown.contains("s3cret"), "{shown}");
        let parts = parse("postgres://me:pw@h/db?password=other").unwrap();
        let pg = pg_config("x", &parts, &[("password", "other")]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pg.get_password(), Some(&b"other"[..]), "the parameter wins");
        let pg =
            pg_config("x", &parts, &[("options", "-c a='b\\c'")]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pg.get_password(), Some(&b"pw"[..]));
        assert_eq!(pg.get_options(), Some("-c a='b\\c'"));
        assert_eq!(pg.get_dbname(), Some("db"));
        assert_eq!(pg.get_user(), Some("me"));
        let parts = parse("postgres://me@%2Ftmp%2Fsock:5433/db").unwrap();
        let pg = pg_config("x", &parts, &[]).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(pg.get_hosts(), [postgres::config::Host::Unix(_)]));
        assert_eq!(pg.get_ports(), [5433]);
    }

    #[test]
    fn malformed_uris_are_redacted_too() {
        for (uri, shown) in [
            (
                "postgres://u:a/b?c#d@h:1/db?x=1",
                "postgres://***@h:1/db?x=1",
            ),
            ("postgres://u:pw@", "postgres://***@"),
            ("u:pw@h/db", "***@h/db"),
            (
                "postgres://h/db?password=pw&x",
                "postgres://h/db?password=***&x",
            ),
            (
                "postgres://h:99999/db?sslpassword=pw",
                "postgres://h:99999/db?sslpassword=***",
            ),
            ("postgres://h/db#pw", "postgres://h/db"),
        ] {
            assert_eq!(redact(uri), shown, "{uri}");
        }
    }

    #[test]
    fn scrubbing() {
        let secrets = ["P%40ss".to_owned(), "p@ss".to_owned(), "ab".to_owned()];
        assert_eq!(
            scrub("a p%40ss, P@SS and p@ss about tabs", &secrets),
            "a ***, *** and *** about tabs"
        );
        assert_eq!(password_forms(b"a/b"), ["a/b", "a%2Fb"]);
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
