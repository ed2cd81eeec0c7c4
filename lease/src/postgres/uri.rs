//! `postgres://USER@HOST:PORT/DB?app=NAME&ttl=10s` (and `postgresql://`): libpq's URI, with
//! `sslmode`, `sslrootcert` and the parameters of the `postgres` crate.

use std::time::Duration;

use super::tls::{PgTls, SslMode};
use super::PostgresCoordinator;
use crate::uri::{common, invalid, owner_token, parse, percent_decode, Common, Parts, Target};
use crate::uri::{DEFAULT_TABLE, DEFAULT_TTL};
use crate::LeaseError;

/// The target of a `postgres://` or `postgresql://` URI.
pub(crate) fn target(uri: &str) -> Result<Target, LeaseError> {
    let parts = parse(uri)?;
    let params: Common = common(uri, &parts)?;
    if params.reserve.is_some() || params.write_delay.is_some() {
        return Err(invalid(
            uri,
            "postgres:// reserves state up to the lease deadline: set ttl, not reserve",
        ));
    }
    let ttl = params.ttl.unwrap_or(DEFAULT_TTL);
    if ttl < Duration::from_millis(200) || ttl > Duration::from_secs(86_400) {
        return Err(invalid(uri, "ttl must be between 200ms and 1 day"));
    }
    let table = params.table.unwrap_or_else(|| DEFAULT_TABLE.to_owned());
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
    let mut passthrough = params.passthrough;
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
        Some(value) => crate::uri::parse_max_skew(uri, value)?,
    };
    let config = pg_config(uri, &parts, &passthrough, None)?;
    // Each host of a multi-host URI on its own too, so that each is given its share of the
    // connection's patience: a frozen first host would otherwise spend all of it.
    let each_host = if parts.hosts.len() > 1
        && !passthrough
            .iter()
            .any(|(key, _)| matches!(*key, "host" | "hostaddr" | "port"))
    {
        (0..parts.hosts.len())
            .map(|host| pg_config(uri, &parts, &passthrough, Some(host)))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let app = params.app;
    let workers = params.workers;
    let redacted_uri = match workers {
        Some(range) => format!("{}?app={app}&workers={range}", parts.base()),
        None => format!("{}?app={app}", parts.base()),
    };
    Ok(Target {
        coordinator: Box::new(
            PostgresCoordinator::new(config, redacted_uri, &table, &app, ttl, owner_token())
                .with_each_host(each_host)
                .with_tls(tls)
                .with_max_skew(max_skew)
                .with_workers(workers),
        ),
        reserve: ttl,
    })
}

/// The connection config of a `postgres://` URI, from the parts `url` found, with the same
/// meaning as libpq's URIs (parameters after the URI's own user, host, port and database;
/// a `password` parameter wins over the user info's), for every host or for the `only` one.
/// The password never passes through text the client could echo.
fn pg_config(
    uri: &str,
    parts: &Parts,
    passthrough: &[(&str, &str)],
    only: Option<usize>,
) -> Result<tokio_postgres::Config, LeaseError> {
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
        let chosen = parts
            .hosts
            .iter()
            .enumerate()
            .filter(|(at, _)| only.is_none_or(|only| only == *at));
        for (_, (host, port)) in chosen {
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
    let mut config: tokio_postgres::Config =
        settings
            .join(" ")
            .parse()
            .map_err(|error: tokio_postgres::Error| {
                // "invalid connection string" says little; its source names the option.
                invalid(uri, super::connection::described(&error))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_config_from_the_parts() {
        let config = |uri: &str| match crate::uri::connect(uri) {
            Err(error) => panic!("{error}"),
            Ok(target) => target.coordinator.redacted_uri(),
        };
        let shown = config("postgresql://me:s3cret@db:6543/orders?app=a&sslmode=disable");
        assert!(
            shown.contains("postgresql://me@db:6543/orders?app=a"),
            "{shown}"
        );
        assert!(!shown.contains("s3cret"), "{shown}");
        let parts = parse("postgres://me:pw@h/db?password=other").unwrap();
        let pg = pg_config("x", &parts, &[("password", "other")], None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pg.get_password(), Some(&b"other"[..]), "the parameter wins");
        let pg = pg_config("x", &parts, &[("options", "-c a='b\\c'")], None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pg.get_password(), Some(&b"pw"[..]));
        assert_eq!(pg.get_options(), Some("-c a='b\\c'"));
        assert_eq!(pg.get_dbname(), Some("db"));
        assert_eq!(pg.get_user(), Some("me"));
        let parts = parse("postgres://me@%2Ftmp%2Fsock:5433/db").unwrap();
        let pg = pg_config("x", &parts, &[], None).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            pg.get_hosts(),
            [tokio_postgres::config::Host::Unix(_)]
        ));
        assert_eq!(pg.get_ports(), [5433]);
    }

    /// A multi-host URI also gives one config per host, each with that host and its port
    /// only and every other setting: each host is then tried with its own share of the
    /// connection's patience.
    #[test]
    fn a_config_for_each_host() {
        use tokio_postgres::config::{Host, TargetSessionAttrs};
        let parts = parse("postgres://me:pw@a:5433,b,c:5435/db").unwrap();
        let settings = [("target_session_attrs", "read-write")];
        let all = pg_config("x", &parts, &settings, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(all.get_hosts().len(), 3);
        for (at, (host, port)) in [("a", 5433), ("b", 5432), ("c", 5435)].iter().enumerate() {
            let one = pg_config("x", &parts, &settings, Some(at)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(one.get_hosts(), [Host::Tcp(host.to_string())]);
            assert_eq!(one.get_ports(), [*port]);
            assert_eq!(one.get_password(), Some(&b"pw"[..]));
            assert_eq!(one.get_dbname(), Some("db"));
            assert_eq!(
                one.get_target_session_attrs(),
                TargetSessionAttrs::ReadWrite
            );
        }
    }
}
