//! `redis://[USER:PASSWORD@]HOST[:PORT][/DB]?app=NAME&ttl=10s` and `rediss://` (TLS).

use std::time::Duration;

use crate::uri::{
    check_app, invalid, owner_token, parse, parse_duration, Target, DEFAULT_APP, DEFAULT_TTL,
};
use crate::LeaseError;

/// `redis://[USER:PASSWORD@]HOST[:PORT][/DB]?app=NAME&ttl=10s`, `rediss://` for TLS (with
/// `cacert=PATH`, a PEM file of the certificates to trust instead of the system's).
pub(crate) fn target(uri: &str) -> Result<Target, LeaseError> {
    let parts = parse(uri)?;
    let tls = parts.scheme == "rediss";
    let mut app = DEFAULT_APP.to_owned();
    let mut ttl = DEFAULT_TTL;
    let mut cacert = None;
    let mut max_skew = Some(crate::coordinator::DEFAULT_MAX_SKEW);
    let mut replication = crate::redis::Replication::default();
    let mut workers = None;
    for (key, value) in &parts.query {
        match key.as_str() {
            "app" => app = value.clone(),
            "ttl" => {
                ttl = parse_duration(value)
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| invalid(uri, "ttl must look like 10s, 1500ms or 2m"))?
            }
            "max_skew" => max_skew = crate::uri::parse_max_skew(uri, value)?,
            "workers" => workers = Some(crate::uri::parse_workers(uri, value)?),
            "min_replicas" => {
                replication.min_replicas = value
                    .parse()
                    .ok()
                    .filter(|count| *count <= 64)
                    .ok_or_else(|| invalid(uri, "min_replicas must be a number from 0 to 64"))?
            }
            "replication" if value == "async" => replication.accept_async = true,
            "replication" => return Err(invalid(uri, "replication must be async (the risk accepted)")),
            "cacert" if tls => cacert = Some(value.clone()),
            "cacert" => return Err(invalid(uri, "cacert is a rediss:// (TLS) parameter")),
            _ => {
                return Err(invalid(
                    uri,
                    format!(
                        "unknown parameter {key:?} for {}:// (expected app, ttl, max_skew, workers, min_replicas, replication{})",
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
    let redacted_uri = match workers {
        Some(range) => format!("{}?app={app}&workers={range}", parts.base()),
        None => format!("{}?app={app}", parts.base()),
    };
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
        crate::redis::RedisCoordinator::new(endpoint, redacted_uri, &app, ttl, owner_token())
            .map_err(|reason| invalid(uri, reason))?
            .with_max_skew(max_skew)
            .with_replication(replication)
            .with_workers(workers);
    Ok(Target {
        coordinator: Box::new(coordinator),
        reserve: ttl,
    })
}
