//! `zookeeper://` URIs: hosts, root path, identity and parameters, through the one URI parser
//! every scheme uses ([`crate::uri::parse`]).

use std::path::PathBuf;
use std::time::Duration;

use super::{address::local_ip, ZooKeeperCoordinator, DEFAULT_ROOT, DEFAULT_SESSION_TIMEOUT};
use crate::uri::invalid;
use crate::LeaseError;

fn check_segment(uri: &str, segment: &str) -> Result<(), LeaseError> {
    if crate::uri::is_name(segment) {
        Ok(())
    } else {
        Err(invalid(
            uri,
            format!(
                "each path segment (and the app) must be 1 to 64 of A-Z a-z 0-9 _ - . \
                 (not starting with '.'), found {segment:?}"
            ),
        ))
    }
}

fn check_identity(uri: &str, identity: &str) -> Result<(), LeaseError> {
    let ok = !identity.is_empty()
        && identity.len() <= 200
        && identity
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:[]@".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            uri,
            format!("server must be 1 to 200 of A-Z a-z 0-9 _ - . : [ ] @, found {identity:?}"),
        ))
    }
}

impl ZooKeeperCoordinator {
    /// A coordinator for `zookeeper://HOST:PORT[,HOST:PORT...]/snowflake/APP?...`.
    ///
    /// Parameters: `ttl` (session timeout, 200 ms to 60 s, default 10 s; the server may
    /// negotiate it into its own `minSessionTimeout`..`maxSessionTimeout`), `server` (this
    /// server's identity, default `<ip>:<port>` with the `port` parameter, or `<ip>:<pid>`),
    /// `port`, `cache` (an absolute path of a file remembering the last worker id), `takeover`
    /// (`on`, the default, or `off`: worker ids bound to their identity for good, see
    /// [`ZooKeeperCoordinator`]), `offline` (`cache` starts from the cache file when ZooKeeper
    /// cannot be reached; needs `takeover=off`, `cache` and an explicit `server` or `port`), `max_skew`
    /// (the start-up clock check's bound, default 5 s, `off` to skip it), and `app` when the
    /// path names no application.
    pub fn from_uri(uri: &str) -> Result<ZooKeeperCoordinator, LeaseError> {
        if !uri
            .get(..12)
            .is_some_and(|s| s.eq_ignore_ascii_case("zookeeper://"))
        {
            return Err(invalid(uri, "expected zookeeper://"));
        }
        // User info is refused by the parser (ZooKeeper digest auth is not supported).
        let parts = crate::uri::parse(uri)?;
        if parts.hosts.is_empty() {
            return Err(invalid(uri, "expected HOST:PORT[,HOST:PORT...]"));
        }
        let mut hosts = Vec::new();
        for (host, port) in &parts.hosts {
            let port = port.unwrap_or(2181);
            if port == 0 {
                return Err(invalid(uri, format!("expected HOST:PORT, found {host}:0")));
            }
            hosts.push(format!("{host}:{port}"));
        }
        // `url` resolves `.` and `..` in paths: refuse them as written instead.
        let raw_path = uri[12..].split(['?', '#']).next().unwrap_or("");
        let raw_path = raw_path.find('/').map_or("", |at| &raw_path[at..]);
        for segment in raw_path.split('/').filter(|s| !s.is_empty()) {
            check_segment(uri, segment)?;
        }
        let path = parts.url.path();
        let mut app = None;
        let mut ttl = DEFAULT_SESSION_TIMEOUT;
        let mut identity = None;
        let mut port = None;
        let mut cache = None;
        let mut max_skew = Some(crate::coordinator::DEFAULT_MAX_SKEW);
        let mut takeover = true;
        let mut offline = false;
        let mut workers = None;
        for (key, value) in parts.query {
            match key.as_str() {
                "app" => app = Some(value),
                "ttl" => {
                    ttl = crate::parse_duration(&value)
                        .filter(|d| {
                            *d >= Duration::from_millis(200) && *d <= Duration::from_secs(60)
                        })
                        .ok_or_else(|| {
                            invalid(
                                uri,
                                "ttl (the session timeout) must be 200ms to 60s, like 10s",
                            )
                        })?;
                }
                "server" => identity = Some(value),
                "port" => {
                    port = Some(
                        value
                            .parse::<u16>()
                            .map_err(|_| invalid(uri, "port must be a number 0 to 65535"))?,
                    );
                }
                "cache" => {
                    if !value.starts_with('/') {
                        return Err(invalid(uri, "cache must be an absolute file path"));
                    }
                    cache = Some(PathBuf::from(value));
                }
                "max_skew" => max_skew = crate::uri::parse_max_skew(uri, &value)?,
                "workers" => workers = Some(crate::uri::parse_workers(uri, &value)?),
                "takeover" => {
                    takeover = match value.as_str() {
                        "on" => true,
                        "off" => false,
                        _ => return Err(invalid(uri, "takeover must be on or off")),
                    }
                }
                "offline" => {
                    offline = match value.as_str() {
                        "cache" => true,
                        "off" => false,
                        _ => return Err(invalid(uri, "offline must be cache or off")),
                    }
                }
                other => {
                    return Err(invalid(
                        uri,
                        format!(
                            "unknown parameter {other:?} for zookeeper:// \
                             (expected app, ttl, server, port, cache, takeover, offline, max_skew, workers)"
                        ),
                    ))
                }
            }
        }
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        for segment in &segments {
            check_segment(uri, segment)?;
        }
        let root = match (segments.as_slice(), app) {
            ([], app) | (["snowflake"], app) => {
                let app = app.unwrap_or_else(|| crate::DEFAULT_APP.to_owned());
                check_segment(uri, &app)?;
                format!("{DEFAULT_ROOT}/{app}")
            }
            ([.., last], Some(app)) if *last != app => {
                return Err(invalid(
                    uri,
                    format!("the path names app {last:?} but the app parameter says {app:?}"),
                ))
            }
            (segments, _) => format!("/{}", segments.join("/")),
        };
        if offline {
            // Without ZooKeeper nothing fences the cached worker id off from others: that is
            // safe only where no process takes over another identity's worker id.
            if takeover {
                return Err(invalid(
                    uri,
                    "offline=cache needs takeover=off: a process started from its cache holds \
                     no ZooKeeper node, so it is safe only when worker ids stay bound to their \
                     server identity for good (no takeover of other identities' worker ids)",
                ));
            }
            if cache.is_none() {
                return Err(invalid(
                    uri,
                    "offline=cache needs cache=/PATH (the file the worker id and its state \
                     record are kept in)",
                ));
            }
            if identity.is_none() && port.is_none() {
                return Err(invalid(
                    uri,
                    "offline=cache needs a stable server identity: set server= or port= \
                     (the default identity <ip>:<pid> changes at every start)",
                ));
            }
        }
        let hosts = hosts.join(",");
        let identity = match identity {
            Some(identity) => identity,
            None => format!(
                "{}:{}",
                local_ip(&hosts),
                port.map_or_else(|| std::process::id().to_string(), |p| p.to_string())
            ),
        };
        check_identity(uri, &identity)?;
        let mut redacted_uri = format!("zookeeper://{hosts}{root}?server={identity}");
        if let Some(range) = workers {
            redacted_uri.push_str(&format!("&workers={range}"));
        }
        Ok(ZooKeeperCoordinator {
            hosts,
            root,
            identity,
            session_timeout: ttl,
            cache,
            takeover,
            offline,
            cache_lock: None,
            unreachable: None,
            offline_worker: None,
            max_skew,
            workers,
            redacted_uri,
            runtime: None,
            session: None,
            held: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(uri: &str) -> &'static str {
        match ZooKeeperCoordinator::from_uri(uri) {
            Ok(_) => "OK",
            Err(error) => error.code(),
        }
    }

    #[test]
    fn uris() {
        let c = ZooKeeperCoordinator::from_uri(
            "zookeeper://127.0.0.1:2181/snowflake/orders?server=a:1",
        )
        .unwrap();
        assert_eq!(c.root(), "/snowflake/orders");
        assert_eq!(c.identity(), "a:1");
        assert_eq!(c.session_timeout(), DEFAULT_SESSION_TIMEOUT);
        let c =
            ZooKeeperCoordinator::from_uri("zookeeper://zk1,zk2:2182?app=billing&ttl=2s&port=8080")
                .unwrap();
        assert_eq!(c.root(), "/snowflake/billing");
        assert_eq!(c.hosts, "zk1:2181,zk2:2182");
        assert!(c.identity().ends_with(":8080"), "{}", c.identity());
        assert_eq!(c.session_timeout(), Duration::from_secs(2));
        let c = ZooKeeperCoordinator::from_uri("zookeeper://h:1/ids/prod/orders").unwrap();
        assert_eq!(c.root(), "/ids/prod/orders");
        assert_eq!(code("zookeeper://h:1"), "OK");
        let c = ZooKeeperCoordinator::from_uri(
            "zookeeper://h:1/snowflake/a?offline=cache&takeover=off&cache=/c&port=80",
        )
        .unwrap();
        assert!(c.offline && !c.takeover);
        for bad in [
            "zookeeper://",
            "zookeeper://:2181/snowflake/a",
            "zookeeper://h:0/snowflake/a",
            "zookeeper://h:99999/snowflake/a",
            "zookeeper://u@h:1/snowflake/a",
            "zookeeper://h:1/snowflake/a?ttl=100ms",
            "zookeeper://h:1/snowflake/a?ttl=2m",
            "zookeeper://h:1/snowflake/a?max_skew=soon",
            "zookeeper://h:1/snowflake/a?bogus=1",
            "zookeeper://h:1/snowflake/a?app=b",
            "zookeeper://h:1/snowflake/../x",
            "zookeeper://h:1/snowflake/a?server=x/y",
            "zookeeper://h:1/snowflake/a?server=",
            "zookeeper://h:1/snowflake/a?cache=relative",
            "zookeeper://h:1/snowflake/a?takeover=no",
            "zookeeper://h:1/snowflake/a?offline=yes",
            "zookeeper://h:1/snowflake/a?offline=cache&cache=/c&server=a",
            "zookeeper://h:1/snowflake/a?offline=cache&takeover=on&cache=/c&server=a",
            "zookeeper://h:1/snowflake/a?offline=cache&takeover=off&server=a",
            "zookeeper://h:1/snowflake/a?offline=cache&takeover=off&cache=/c",
        ] {
            assert_eq!(code(bad), "INVALID_URI", "{bad}");
        }
    }
}
