//! Coordinator URIs, every scheme taken apart by one parser ([`parse`], the `url` crate, which
//! also splits host lists): `file:///DIR`, `k8s:///DIR` and `env:///DIR` (`file.rs`),
//! `postgres://` (`postgres.rs`), `redis://` and `rediss://` (`redis.rs`), and `zookeeper://`
//! (`crate::zookeeper`'s `config.rs`); [`connect`] picks the scheme, and [`redact`] shows a
//! URI without its secrets.
//!
//! Secrets never reach a message: a password is taken from the user info or from a query
//! parameter whose name contains `pass`, `secret` or `token`; [`redact`] drops both, and
//! every reason that could echo a part of the URI is scrubbed of them ([`invalid`]). A URI
//! the parser refuses is shown without anything before its last `@` (where a password with an
//! unencoded `/`, `?` or `#` would be) and without its fragment.

use std::time::Duration;

use percent_encoding::percent_decode_str;
use url::Url;

use crate::secrets::scrub;
use crate::{Coordinator, LeaseError};

// Each coordinator's own parameters are parsed beside it (`file/uri.rs`, `postgres/uri.rs`,
// `redis/uri.rs`, `zookeeper/config.rs`); this module parses what they share and picks one.

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
    #[cfg(any(feature = "postgres", feature = "redis", test))]
    pub fn user(&self) -> String {
        String::from_utf8_lossy(&decode_lenient(self.url.username())).into_owned()
    }

    /// The password of the user info, percent-decoded.
    #[cfg(any(feature = "postgres", feature = "redis", test))]
    pub fn password(&self) -> Option<Vec<u8>> {
        self.url.password().map(decode_lenient)
    }

    /// `scheme://[user@]hosts` and the path as written: no password, no query.
    #[cfg(any(feature = "postgres", feature = "redis", test))]
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
        let shown = parts.redacted();
        // The parser may read a URI otherwise than a person would (a '\' in the user info of
        // a special scheme ends the host for it): then a password can land in the path. What
        // shows any secret falls back to the textual redaction below, which hides everything
        // before the last '@'.
        if !passwords_of(uri)
            .iter()
            .any(|secret| shown.contains(secret.as_str()))
        {
            return shown;
        }
    }
    redact_text(uri)
}

/// The passwords `uri` holds as text: after the first ':' of everything before the last '@',
/// as written and percent-decoded (empty ones left out).
fn passwords_of(uri: &str) -> Vec<String> {
    let rest = uri.split_once("://").map_or(uri, |(_, rest)| rest);
    let Some((user_info, _)) = rest.rsplit_once('@') else {
        return Vec::new();
    };
    let Some((_, password)) = user_info.split_once(':') else {
        return Vec::new();
    };
    let decoded = String::from_utf8_lossy(&decode_lenient(password)).into_owned();
    [password.to_owned(), decoded]
        .into_iter()
        .filter(|secret| !secret.is_empty())
        .collect()
}

/// Redaction without the parser: everything before the last '@' hidden, secret parameters too.
fn redact_text(uri: &str) -> String {
    let (scheme, rest) = match uri.split_once("://").filter(|(s, _)| is_scheme(s)) {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), uri),
    };
    // An '@' inside the query: what is left after it is still query (`?a=b@c&password=...`).
    let in_query = rest.rfind('@').is_some_and(|at| rest[..at].contains('?'));
    let rest = match rest.rfind('@') {
        Some(at) => format!("***@{}", &rest[at + 1..]),
        None => rest.to_owned(),
    };
    let rest = rest.split('#').next().unwrap_or("");
    if in_query {
        return format!("{scheme}{}", redact_query(rest));
    }
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

/// The value of a `max_skew` URI parameter: `off`, or a duration like `5s`, `500ms`, `1m`
/// (at least 1 ms). `uri` is for the `INVALID_URI` message only.
#[cfg(any(
    feature = "postgres",
    feature = "redis",
    feature = "zookeeper",
    feature = "etcd"
))]
pub(crate) fn parse_max_skew(uri: &str, value: &str) -> Result<Option<Duration>, LeaseError> {
    if value.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    crate::parse_duration(value)
        .filter(|d| !d.is_zero())
        .map(Some)
        .ok_or_else(|| {
            invalid(
                uri,
                "max_skew must be off or look like 5s, 500ms or 1m (at least 1ms)",
            )
        })
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

pub(crate) fn check_app(uri: &str, app: &str) -> Result<(), LeaseError> {
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
#[cfg(any(feature = "postgres", feature = "redis"))]
pub fn owner_token() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
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

/// The parameters `file://` (with `k8s://`, `env://`) and `postgres://` share, taken from the
/// parsed query; every other parameter is left in `passthrough`, in order, for the scheme.
pub(crate) struct Common<'a> {
    pub app: String,
    pub ttl: Option<Duration>,
    pub reserve: Option<Duration>,
    pub table: Option<String>,
    pub write_delay: Option<Duration>,
    /// `workers=LO-HI` or `workers=N`: the worker ids this pool may lease.
    pub workers: Option<crate::coordinator::WorkerRange>,
    pub passthrough: Vec<(&'a str, &'a str)>,
}

/// Takes [`Common`]'s parameters from `parts` and checks the app name.
pub(crate) fn common<'a>(uri: &str, parts: &'a Parts) -> Result<Common<'a>, LeaseError> {
    let mut app = DEFAULT_APP.to_owned();
    let mut ttl = None;
    let mut reserve = None;
    let mut table = None;
    let mut write_delay = None;
    let mut workers = None;
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
            "workers" => workers = Some(parse_workers(uri, value)?),
            _ => passthrough.push((key.as_str(), value.as_str())),
        }
    }
    check_app(uri, &app)?;
    Ok(Common {
        app,
        ttl,
        reserve,
        table,
        write_delay,
        workers,
        passthrough,
    })
}

/// The value of a `workers` URI parameter: `LO-HI` (inclusive) or `N`. Whether it fits the
/// layout is checked when the layout is known ([`crate::coordinator::pool`]). `uri` is for
/// the `INVALID_URI` message only.
pub(crate) fn parse_workers(
    uri: &str,
    value: &str,
) -> Result<crate::coordinator::WorkerRange, LeaseError> {
    crate::coordinator::WorkerRange::parse(value).map_err(|reason| invalid(uri, reason))
}

/// The refusal of a URI whose scheme's cargo feature this build leaves out.
#[cfg(not(all(
    feature = "postgres",
    feature = "redis",
    feature = "zookeeper",
    feature = "k8s",
    feature = "etcd"
)))]
fn not_built(uri: &str, scheme: &str) -> LeaseError {
    let feature = match scheme {
        "rediss" => "redis",
        "etcds" => "etcd",
        "postgresql" => "postgres",
        other => other,
    };
    invalid(
        uri,
        format!(
            "{scheme}:// is not built in: enable clockflake-lease's cargo feature \"{feature}\" \
             (features = [\"{feature}\"]; the default features include every coordinator)"
        ),
    )
}

pub(crate) fn connect(uri: &str) -> Result<Target, LeaseError> {
    let scheme = uri
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    match scheme.as_deref() {
        #[cfg(feature = "redis")]
        Some("redis" | "rediss") => crate::redis::uri::target(uri),
        #[cfg(feature = "zookeeper")]
        Some("zookeeper") => {
            let (coordinator, ttl) = crate::zookeeper::target(uri)?;
            Ok(Target {
                coordinator,
                reserve: ttl,
            })
        }
        #[cfg(feature = "postgres")]
        Some("postgres" | "postgresql") => crate::postgres::uri::target(uri),
        #[cfg(feature = "k8s")]
        Some("k8s") => crate::file::uri::target(uri, "k8s"),
        #[cfg(feature = "etcd")]
        Some("etcd" | "etcds") => crate::etcd::uri::target(uri),
        Some(scheme @ ("file" | "env")) => crate::file::uri::target(uri, scheme),
        #[cfg(not(feature = "redis"))]
        Some(scheme @ ("redis" | "rediss")) => Err(not_built(uri, scheme)),
        #[cfg(not(feature = "zookeeper"))]
        Some(scheme @ "zookeeper") => Err(not_built(uri, scheme)),
        #[cfg(not(feature = "postgres"))]
        Some(scheme @ ("postgres" | "postgresql")) => Err(not_built(uri, scheme)),
        #[cfg(not(feature = "k8s"))]
        Some(scheme @ "k8s") => Err(not_built(uri, scheme)),
        #[cfg(not(feature = "etcd"))]
        Some(scheme @ ("etcd" | "etcds")) => Err(not_built(uri, scheme)),
        Some(other) if is_scheme(other) => Err(invalid(
            uri,
            format!(
                "unknown scheme {other:?}: expected file, postgres, redis, zookeeper, \
                 etcd, k8s or env"
            ),
        )),
        _ => Err(invalid(uri, "no scheme")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_parameter_after_an_at_sign_in_the_query_is_redacted() {
        // Found by the lease_uri fuzz target: refused for its '@', shown with the password.
        for uri in [
            "postgres://h/db?app=a@b&password=hunter2",
            "file:///var/lib/ids?app=orders&reserve=2s://@&password=hunter2",
            "file:///var/ids?app=a&r//var/@&password=hunter2/ids?app=b",
        ] {
            let shown = redact(uri);
            assert!(!shown.contains("hunter2"), "{shown}");
            let error = parse(uri).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(!error.is_empty() && !error.contains("hunter2"), "{error}");
        }
    }

    #[test]
    fn a_password_the_parser_reads_as_path_is_redacted() {
        // Found by the lease_uri fuzz target in make test: for a special scheme a '\\' in the
        // user info ends the host, and the password was shown as part of the path.
        for uri in [
            "https://user637ttps\\:hunter2user1@ca\u{1}app-a",
            "https://u\\:hunter2@host/db",
        ] {
            let shown = redact(uri);
            assert!(!shown.contains("hunter2"), "{uri:?} shown as {shown:?}");
        }
        assert_eq!(
            redact("postgres://user:hunter2@db/ids?app=a"),
            "postgres://user:***@db/ids?app=a"
        );
    }

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

    /// `workers=` on every scheme: malformed or empty ranges are refused when the URI is
    /// read, naming the problem (whether a range fits the layout is checked at acquire).
    #[test]
    fn malformed_worker_ranges_are_refused_on_every_scheme() {
        let bases = [
            (true, "file:///tmp/clockflake-uri-test?app=a&"),
            (true, "env:///tmp/clockflake-uri-test?app=a&"),
            (cfg!(feature = "postgres"), "postgres://u@127.0.0.1/db?"),
            (cfg!(feature = "redis"), "redis://127.0.0.1:6379/0?"),
            (
                cfg!(feature = "zookeeper"),
                "zookeeper://127.0.0.1:2181/snowflake/a?",
            ),
        ];
        for (_, base) in bases.into_iter().filter(|(built, _)| *built) {
            for (range, reason) in [
                ("", "workers must look like"),
                ("5-2", "is empty"),
                ("a-b", "workers must look like"),
                ("-3", "workers must look like"),
                ("1-", "workers must look like"),
                ("0x10", "workers must look like"),
                ("+1", "workers must look like"),
                ("1--2", "workers must look like"),
                ("1-2-3", "workers must look like"),
                (" 1", "workers must look like"),
                ("99999999999999999999", "workers must look like"),
            ] {
                let uri = format!("{base}workers={range}");
                let Err(error) = connect(&uri) else {
                    panic!("{uri} was accepted");
                };
                assert_eq!(error.code(), "INVALID_URI", "{uri}");
                assert!(error.to_string().contains(reason), "{uri}: {error}");
            }
        }
    }

    /// Built without a coordinator's feature (`make check-lease-features`), its URIs are
    /// refused with `INVALID_URI` naming the feature to enable.
    #[test]
    #[cfg(not(all(
        feature = "postgres",
        feature = "redis",
        feature = "zookeeper",
        feature = "k8s"
    )))]
    fn a_scheme_left_out_of_the_build_names_its_feature() {
        let cases = [
            (
                cfg!(feature = "postgres"),
                "postgresql://u@h/db",
                "postgres",
            ),
            (cfg!(feature = "redis"), "rediss://h:6379/0", "redis"),
            (
                cfg!(feature = "zookeeper"),
                "zookeeper://h:2181/snowflake/a",
                "zookeeper",
            ),
            (cfg!(feature = "k8s"), "k8s:///tmp/x?app=a", "k8s"),
        ];
        for (built, uri, feature) in cases.into_iter().filter(|case| !case.0) {
            let Err(error) = connect(uri) else {
                panic!("{uri} was accepted (built: {built})");
            };
            assert_eq!(error.code(), "INVALID_URI", "{uri}");
            let message = error.to_string();
            assert!(
                message.contains(&format!("cargo feature \"{feature}\"")),
                "{uri}: {message}"
            );
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
