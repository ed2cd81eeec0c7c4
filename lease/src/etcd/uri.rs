//! `etcd://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/[PREFIX]?app=NAME&ttl=10s` and `etcds://`
//! (TLS).

use std::time::Duration;

use percent_encoding::percent_decode_str;

use super::{EtcdCoordinator, Settings, DEFAULT_PREFIX};
use crate::uri::{common, invalid, is_name, parse, Common, Target, DEFAULT_TTL};
use crate::LeaseError;

/// The target of an `etcd://` or `etcds://` URI.
pub(crate) fn target(uri: &str) -> Result<Target, LeaseError> {
    let parts = parse(uri)?;
    let tls = parts.scheme == "etcds";
    let params: Common = common(uri, &parts)?;
    if params.reserve.is_some() || params.table.is_some() || params.write_delay.is_some() {
        return Err(invalid(
            uri,
            "etcd:// takes app, ttl, max_skew, workers and, for etcds://, cacert (the state record is \
             reserved up to the lease deadline: set ttl, not reserve)",
        ));
    }
    let ttl = params.ttl.unwrap_or(DEFAULT_TTL);
    if ttl < Duration::from_millis(200) || ttl > Duration::from_secs(86_400) {
        return Err(invalid(uri, "ttl must be between 200ms and 1 day"));
    }
    let mut max_skew = Some(crate::coordinator::DEFAULT_MAX_SKEW);
    let mut cacert = None;
    for (key, value) in &params.passthrough {
        match *key {
            "max_skew" => max_skew = crate::uri::parse_max_skew(uri, value)?,
            "cacert" if tls => cacert = Some((*value).to_owned()),
            "cacert" => return Err(invalid(uri, "cacert is an etcds:// (TLS) parameter")),
            other => {
                return Err(invalid(
                    uri,
                    format!(
                        "unknown parameter {other:?} for {}:// (expected app, ttl, max_skew, workers{})",
                        parts.scheme,
                        if tls { ", cacert" } else { "" }
                    ),
                ))
            }
        }
    }
    if parts.hosts.is_empty() {
        return Err(invalid(
            uri,
            "expected at least one host: etcd://HOST:PORT[,HOST:PORT...]/",
        ));
    }
    let endpoints: Vec<String> = parts
        .hosts
        .iter()
        .map(|(host, port)| {
            let scheme = if tls { "https" } else { "http" };
            format!("{scheme}://{host}:{}", port.unwrap_or(2379))
        })
        .collect();
    // The path names the prefix of the keys: `/clockflake` unless given.
    let path = parts.url.path().trim_matches('/');
    let prefix = if path.is_empty() {
        DEFAULT_PREFIX.to_owned()
    } else {
        for segment in path.split('/') {
            let segment = crate::uri::percent_decode(segment).map_err(|r| invalid(uri, r))?;
            if !is_name(&segment) {
                return Err(invalid(
                    uri,
                    "each segment of the path (the prefix of the keys) must be 1 to 64 of \
                     A-Z a-z 0-9 _ - . (not starting with '.')",
                ));
            }
        }
        format!("/{path}")
    };
    let decode = |text: &str| -> Result<String, LeaseError> {
        String::from_utf8(percent_decode_str(text).collect()).map_err(|_| {
            invalid(
                uri,
                "the user name or password is not UTF-8 once percent-decoded",
            )
        })
    };
    let user = match (parts.url.username(), parts.url.password()) {
        ("", None) => None,
        ("", Some(_)) => return Err(invalid(uri, "a password needs a user name: USER:PASSWORD@")),
        (_, None) => return Err(invalid(uri, "a user name needs a password: USER:PASSWORD@")),
        (user, Some(password)) => Some((decode(user)?, decode(password)?)),
    };
    let cacert = match cacert {
        Some(path) => Some(
            std::fs::read(&path)
                .map_err(|error| invalid(uri, format!("cacert: cannot read {path:?}: {error}")))?,
        ),
        None => None,
    };
    let app = params.app;
    let user_shown = match parts.url.username() {
        "" => String::new(),
        user => format!("{user}@"),
    };
    let mut redacted_uri = format!(
        "{}://{user_shown}{}{}?app={app}",
        parts.scheme,
        parts.host_list(),
        parts.url.path()
    );
    if let Some(range) = params.workers {
        redacted_uri.push_str(&format!("&workers={range}"));
    }
    let settings = Settings {
        endpoints,
        user,
        cacert,
        tls,
        prefix,
        app,
        ttl,
        max_skew,
        workers: params.workers,
        redacted_uri,
    };
    Ok(Target {
        coordinator: Box::new(EtcdCoordinator::new(settings)),
        reserve: ttl,
    })
}
