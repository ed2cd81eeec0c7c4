//! Worker ids assigned from outside the pool: a Kubernetes StatefulSet pod's ordinal
//! (`k8s:///DIR?app=NAME`, cargo feature `k8s`) or a hand-assigned `CLOCKFLAKE_WORKER_ID` (`env:///DIR?app=NAME`).
//!
//! The worker id is not chosen from a pool but read from the environment; everything else is
//! `file://`'s: `DIR/NAME/worker-N.lock` is locked (so a second process given the same worker
//! id on the same volume is refused) and `DIR/NAME/worker-N.state` keeps the worker's
//! high-water marks across restarts, so a pod that comes back with its ordinal and its
//! persistent volume continues above every id it issued. The uniqueness of the worker id
//! itself is the assigner's promise (the StatefulSet controller gives each ordinal to one pod
//! at a time; for `CLOCKFLAKE_WORKER_ID`, whoever assigns them).

/// The environment variable to set from the `apps.kubernetes.io/pod-index` label through the
/// downward API (Kubernetes 1.28 and later).
#[cfg(feature = "k8s")]
pub const POD_INDEX_ENV: &str = "CLOCKFLAKE_POD_INDEX";

/// The environment variable `env://` reads its worker id from.
pub const WORKER_ID_ENV: &str = "CLOCKFLAKE_WORKER_ID";

/// A worker id and where it came from (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assigned {
    /// The worker id.
    pub worker_id: u64,
    /// Where it was read, for people: `CLOCKFLAKE_POD_INDEX=3`, `hostname ids-3`, ...
    pub source: String,
}

/// A decimal worker id as an operator writes it: digits only, no sign, no leading zero.
fn parse_index(text: &str) -> Option<u64> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

/// The pod's ordinal: `CLOCKFLAKE_POD_INDEX` if set, else the `-N` suffix of the host name
/// (a StatefulSet pod's host name is `<statefulset>-<ordinal>`). A Deployment's pods end in a
/// random 5-character suffix instead; a suffix of 5 digits or more is refused as one, since
/// it cannot be told from an ordinal.
#[cfg(feature = "k8s")]
pub fn pod_ordinal(pod_index: Option<&str>, hostname: Option<&str>) -> Result<Assigned, String> {
    if let Some(value) = pod_index {
        return parse_index(value.trim())
            .map(|worker_id| Assigned {
                worker_id,
                source: format!("{POD_INDEX_ENV}={worker_id}"),
            })
            .ok_or_else(|| {
                format!("{POD_INDEX_ENV} must be a pod ordinal like 0 or 12, found {value:?}")
            });
    }
    let hostname = hostname
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .ok_or_else(|| {
            format!("no pod ordinal: {POD_INDEX_ENV} is not set and the host name is unknown")
        })?;
    // NAME-ORDINAL, NAME a DNS label (so not empty and not ending in '-').
    let suffix = hostname
        .rsplit_once('-')
        .filter(|(name, _)| !name.is_empty() && !name.ends_with('-'))
        .map(|(_, suffix)| suffix);
    match suffix.and_then(parse_index) {
        Some(worker_id) if suffix.is_some_and(|s| s.len() < 5) => Ok(Assigned {
            worker_id,
            source: format!("host name {hostname}"),
        }),
        _ => Err(format!(
            "no pod ordinal in the host name {hostname:?} (a StatefulSet pod is named \
             NAME-ORDINAL; a Deployment's pods have no ordinal): run it in a StatefulSet, or set \
             {POD_INDEX_ENV} from the apps.kubernetes.io/pod-index label (downward API)"
        )),
    }
}

/// The hand-assigned worker id of `CLOCKFLAKE_WORKER_ID`.
pub fn env_worker_id(value: Option<&str>) -> Result<Assigned, String> {
    let value = value.ok_or_else(|| format!("{WORKER_ID_ENV} is not set"))?;
    parse_index(value.trim())
        .map(|worker_id| Assigned {
            worker_id,
            source: format!("{WORKER_ID_ENV}={worker_id}"),
        })
        .ok_or_else(|| format!("{WORKER_ID_ENV} must be a worker id like 0 or 12, found {value:?}"))
}

/// The host name: `HOSTNAME` (set in every container), else `/etc/hostname`.
#[cfg(feature = "k8s")]
pub(crate) fn hostname() -> Option<String> {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "k8s")]
    fn the_pod_index_label_wins_over_the_host_name() {
        let assigned = pod_ordinal(Some("3"), Some("ids-7")).unwrap();
        assert_eq!(assigned.worker_id, 3);
        assert_eq!(assigned.source, "CLOCKFLAKE_POD_INDEX=3");
    }

    #[test]
    #[cfg(feature = "k8s")]
    fn a_statefulset_host_name_gives_its_ordinal() {
        for (host, ordinal) in [("ids-0", 0), ("orders-ids-12", 12), ("a-9999", 9999)] {
            assert_eq!(
                pod_ordinal(None, Some(host)).unwrap().worker_id,
                ordinal,
                "{host}"
            );
        }
    }

    #[test]
    #[cfg(feature = "k8s")]
    fn a_deployment_pod_or_a_bare_host_has_no_ordinal() {
        for host in [
            "web-7d9f8b6c4-x2kq9", // Deployment: random suffix
            "web-7d9f8b6c4-24567", // Deployment whose random suffix happens to be digits
            "laptop",
            "ids-03",
            "ids-",
            "ids--1",
        ] {
            let error = pod_ordinal(None, Some(host)).unwrap_err();
            assert!(error.contains("no pod ordinal"), "{host}: {error}");
        }
        assert!(pod_ordinal(None, None).unwrap_err().contains("not set"));
        assert!(pod_ordinal(Some("x"), Some("ids-1"))
            .unwrap_err()
            .contains("pod ordinal like"));
    }

    #[test]
    fn the_environment_worker_id_is_a_plain_decimal() {
        assert_eq!(env_worker_id(Some("42")).unwrap().worker_id, 42);
        for bad in [
            "",
            "-1",
            "+1",
            "1.0",
            "0x10",
            "007",
            "99999999999999999999999",
        ] {
            assert!(env_worker_id(Some(bad)).is_err(), "{bad}");
        }
        assert!(env_worker_id(None).unwrap_err().contains("not set"));
    }
}
