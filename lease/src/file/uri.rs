//! `file:///DIR?app=NAME`, and `k8s:///DIR` and `env:///DIR`, which are `file:///DIR` with
//! the worker id assigned from outside (a StatefulSet pod's ordinal, `CLOCKFLAKE_WORKER_ID`).

use std::time::Duration;

use super::{FileCoordinator, Sharing};
use crate::uri::{common, invalid, parse, Common, Target, DEFAULT_RESERVE};
use crate::LeaseError;

/// The target of a `file://`, `k8s://` or `env://` URI (`scheme`, lowercase).
pub(crate) fn target(uri: &str, scheme: &str) -> Result<Target, LeaseError> {
    // k8s:///DIR and env:///DIR are file:///DIR with the worker id assigned from outside.
    let assigned_scheme = match scheme {
        "k8s" => Some("k8s"),
        "env" => Some("env"),
        _ => None,
    };
    let file_like = assigned_scheme.map(|_| {
        let rest = uri.split_once("://").map_or("", |(_, rest)| rest);
        format!("file://{rest}")
    });
    let parts = parse(file_like.as_deref().unwrap_or(uri))?;
    // mode=private (default: 0700 directories, 0600 files) or mode=group (0770, 0660).
    let Common {
        app,
        ttl,
        reserve,
        table,
        write_delay,
        workers,
        mut passthrough,
    } = common(uri, &parts)?;
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
            let assigned = match scheme {
                #[cfg(feature = "k8s")]
                "k8s" => {
                    let pod_index = std::env::var(crate::fixed::POD_INDEX_ENV).ok();
                    crate::fixed::pod_ordinal(
                        pod_index.as_deref(),
                        crate::fixed::hostname().as_deref(),
                    )
                }
                _ => {
                    let value = std::env::var(crate::fixed::WORKER_ID_ENV).ok();
                    crate::fixed::env_worker_id(value.as_deref())
                }
            }
            .map_err(|reason| LeaseError::unavailable(&format!("{scheme}://"), reason))?;
            FileCoordinator::with_assigned(path, &app, sharing, assigned, scheme)?
        }
    };
    coordinator.set_write_delay(write_delay);
    coordinator.set_workers(workers);
    Ok(Target {
        coordinator: Box::new(coordinator),
        reserve,
    })
}
