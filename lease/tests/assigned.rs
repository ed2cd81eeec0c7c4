//! `k8s://` and `env://`: a worker id assigned from outside (a StatefulSet pod's ordinal, a
//! hand-assigned `CLOCKFLAKE_WORKER_ID`), its state kept on the volume as `file://` keeps it.
//! No cluster ran here: each test gives a probe process the environment and files a pod
//! would see (the downward API's pod-index variable, the host name).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::{Command, Stdio};

use clockflake::Layout;
use common::*;

/// A probe with a clean environment (no inherited ordinal or worker id) plus `env`.
fn pod(uri: &str, env: &[(&str, &str)], extra: &[&str]) -> Command {
    let mut args = vec!["--uri", uri];
    args.extend_from_slice(extra);
    let mut command = probe(&args);
    command
        .env_remove("CLOCKFLAKE_POD_INDEX")
        .env_remove("CLOCKFLAKE_WORKER_ID")
        .env("HOSTNAME", "");
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// Runs to the end: (ids, the first refusal line if any).
fn run(command: &mut Command) -> (Vec<u64>, Option<String>) {
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    // A refusal at open goes to stderr, one while issuing to stdout.
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let refusal = stdout
        .lines()
        .chain(stderr.lines())
        .find(|l| l.starts_with("error "))
        .map(str::to_owned);
    (text_ids(&stdout), refusal)
}

/// Runs a pod that asks for one id and must be refused: no id, and the refusal line.
fn refused(uri: &str, env: &[(&str, &str)]) -> String {
    let (ids, refusal) = run(&mut pod(uri, env, &["--count", "1"]));
    assert!(ids.is_empty(), "{ids:?}");
    refusal.unwrap()
}

/// Runs a pod to its end, which must not be refused: its ids, every one under `worker`.
fn ids_of_worker(worker: u64, uri: &str, env: &[(&str, &str)], extra: &[&str]) -> Vec<u64> {
    let (ids, refusal) = run(&mut pod(uri, env, extra));
    assert_eq!(refusal, None);
    assert!(ids
        .iter()
        .all(|id| Layout::CLOCKSEQ.decode(*id).unwrap().worker_id == worker));
    ids
}

#[test]
fn a_statefulset_pod_takes_its_ordinal_and_continues_above_its_marks_after_a_restart() {
    let dir = temp_dir("k8s");
    let uri = format!("k8s://{}?app=orders", dir.display());
    let first = ids_of_worker(
        3,
        &uri,
        &[("CLOCKFLAKE_POD_INDEX", "3")],
        &["--count", "2000"],
    );
    assert_eq!(first.len(), 2000);
    // The pod comes back with its volume, its clock an hour behind: nothing repeats.
    let again = ids_of_worker(
        3,
        &uri,
        &[("HOSTNAME", "ids-3")],
        &["--count", "2000", "--offset-ms", "-3600000"],
    );
    assert_unique(
        "before and after the restart",
        first.iter().chain(&again).copied(),
    );
    assert!(dir.join("orders").join("worker-3.state").exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn two_processes_given_the_same_ordinal_on_one_volume_are_refused() {
    let dir = temp_dir("k8s-twice");
    let uri = format!("k8s://{}?app=orders", dir.display());
    let mut holder = pod(
        &uri,
        &[("HOSTNAME", "ids-1")],
        &["--count", "1", "--hold-ms", "20000"],
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    // Wait until the holder has its lease (it printed its worker id).
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "worker 1");
    let refusal = refused(&uri, &[("CLOCKFLAKE_POD_INDEX", "1")]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(
        refusal.starts_with("error COORDINATOR_UNAVAILABLE"),
        "{refusal}"
    );
    assert!(refusal.contains("held by another process"), "{refusal}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_deployment_pod_and_an_ordinal_beyond_the_layout_are_refused() {
    let dir = temp_dir("k8s-refused");
    let uri = format!("k8s://{}?app=orders", dir.display());
    let refusal = refused(&uri, &[("HOSTNAME", "web-7d9f8b6c4-x2kq9")]);
    assert!(
        refusal.starts_with("error COORDINATOR_UNAVAILABLE"),
        "{refusal}"
    );
    assert!(refusal.contains("no pod ordinal"), "{refusal}");
    // clockseq has 128 worker ids: ordinal 200 does not fit.
    let refusal = refused(&uri, &[("HOSTNAME", "ids-200")]);
    assert!(
        refusal.starts_with("error WORKER_ID_OUT_OF_RANGE"),
        "{refusal}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn env_takes_the_hand_assigned_worker_id() {
    let dir = temp_dir("env");
    let uri = format!("env://{}?app=orders", dir.display());
    ids_of_worker(
        42,
        &uri,
        &[("CLOCKFLAKE_WORKER_ID", "42")],
        &["--count", "100"],
    );
    let refusal = refused(&uri, &[]);
    assert!(
        refusal.contains("CLOCKFLAKE_WORKER_ID is not set"),
        "{refusal}"
    );
    let refusal = refused(&uri, &[("CLOCKFLAKE_WORKER_ID", "-1")]);
    assert!(refusal.contains("must be a worker id"), "{refusal}");
    let _ = std::fs::remove_dir_all(dir);
}
