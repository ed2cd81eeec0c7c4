//! `postgres://` over TLS (`sslmode`, `sslrootcert`, as libpq means them) against real servers:
//! a throwaway PostgreSQL with a self-signed CA and a certificate for `localhost`, started here
//! (`CLOCKFLAKE_PG_TLS=1 scripts/postgres.sh start` in a temp dir) and always stopped, and a
//! plain one (`CLOCKFLAKE_PG_URL` when set, as `make test-lease` and `make test-postgres-tls`
//! do; else one started here too).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use clockflake::Layout;
use clockflake_lease::{open, LeaseError, LeaseOptions};
use common::*;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/postgres.sh");
/// A password in every URI: trust authentication ignores it, and no message may show it.
const PASSWORD: &str = "tls-s3cret-pw";

/// A cluster started by scripts/postgres.sh in its own directory, stopped when dropped (also
/// when a check fails).
struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    fn start(name: &str, tls: bool) -> Cluster {
        let dir = temp_dir(name);
        let cluster = Cluster { dir };
        let status = cluster
            .script("start")
            .env("CLOCKFLAKE_PG_TLS", if tls { "1" } else { "0" })
            .status()
            .unwrap();
        assert!(status.success(), "postgres.sh start ({name})");
        cluster
    }

    fn script(&self, action: &str) -> Command {
        let mut command = Command::new(SCRIPT);
        command.arg(action).env("CLOCKFLAKE_PG_DIR", &self.dir);
        command
    }

    fn output(&self, action: &str) -> String {
        let output = self.script(action).output().unwrap();
        assert!(output.status.success(), "postgres.sh {action}");
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    }

    fn url(&self) -> String {
        self.output("url")
    }

    fn ca(&self) -> PathBuf {
        PathBuf::from(self.output("ca"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.script("stop").status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `postgres://postgres:PASSWORD@HOST:PORT/postgres?app=...&application_name=...&PARAMS`, for
/// the server at `url` reached by the name `host`.
fn uri(url: &str, host: &str, label: &str, params: &str) -> String {
    let rest = url.strip_prefix("postgres://postgres@127.0.0.1").unwrap();
    format!(
        "postgres://postgres:{PASSWORD}@{host}{rest}?app={}&application_name={label}&ttl=5s{params}",
        app(label)
    )
}

/// Opens, issues an id, and returns whether the server saw the connection encrypted (by its
/// `application_name`, from a second, plain connection).
fn open_and_check(uri: &str, plain_url: &str, label: &str) -> Result<bool, LeaseError> {
    let gen = open(uri, Layout::CLOCKSEQ, LeaseOptions::default())?;
    gen.next_id().unwrap();
    let mut client = PgClient::connect(plain_url).unwrap();
    let row = client
        .query_one(
            "SELECT bool_or(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = $1",
            &[&label],
        )
        .unwrap();
    gen.close().unwrap();
    Ok(row
        .get::<_, Option<bool>>(0)
        .unwrap_or_else(|| panic!("{label}: no backend")))
}

fn refused(result: Result<bool, LeaseError>, label: &str) -> String {
    let error = result.expect_err(label);
    assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{label}: {error}");
    let text = format!("{error} {error:?}");
    assert!(
        !text.contains(PASSWORD),
        "{label}: the password leaked: {text}"
    );
    error.to_string()
}

/// A second CA, which signed nothing the server shows.
fn other_ca(dir: &Path) -> PathBuf {
    let (key, cert) = (dir.join("other-ca.key"), dir.join("other-ca.crt"));
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=some other CA", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "openssl: the other CA");
    cert
}

#[test]
fn sslmodes_against_a_tls_server_and_a_plain_one() {
    let started = std::thread::spawn(|| Cluster::start("pg-tls", true));
    let own_plain = std::env::var("CLOCKFLAKE_PG_URL")
        .is_err()
        .then(|| Cluster::start("pg-plain", false));
    let tls = started.join().unwrap();
    let plain_url = own_plain
        .as_ref()
        .map_or_else(|| std::env::var("CLOCKFLAKE_PG_URL").unwrap(), Cluster::url);
    let (url, ca) = (tls.url(), tls.ca());
    let ca = ca.display();
    let wrong_ca = other_ca(&tls.dir);
    let wrong_ca = wrong_ca.display();

    // require: encrypted, certificate not checked (no sslrootcert).
    let label = "tls-require";
    let encrypted = open_and_check(
        &uri(&url, "127.0.0.1", label, "&sslmode=require"),
        &url,
        label,
    );
    assert!(encrypted.unwrap(), "{label}: encrypted");

    // prefer (the default): TLS when the server offers it.
    let label = "tls-prefer";
    let encrypted = open_and_check(&uri(&url, "127.0.0.1", label, ""), &url, label);
    assert!(encrypted.unwrap(), "{label}: the default tries TLS first");

    // disable: plain even though the server offers TLS.
    let label = "tls-disable";
    let encrypted = open_and_check(
        &uri(&url, "127.0.0.1", label, "&sslmode=disable"),
        &url,
        label,
    );
    assert!(!encrypted.unwrap(), "{label}: plain");

    // verify-full with the CA, reached as `localhost` (the certificate's name).
    let label = "tls-verify-full";
    let params = format!("&sslmode=verify-full&sslrootcert={ca}");
    let encrypted = open_and_check(&uri(&url, "localhost", label, &params), &url, label);
    assert!(encrypted.unwrap(), "{label}: encrypted and verified");

    // verify-full reached as 127.0.0.1: the certificate names localhost only.
    let label = "tls-verify-full-ip";
    let result = open_and_check(&uri(&url, "127.0.0.1", label, &params), &url, label);
    let message = refused(result, label);
    assert!(
        message.contains("certificate check (host name)"),
        "{message}"
    );

    // verify-ca checks the chain, not the name: 127.0.0.1 is fine with the right CA...
    let label = "tls-verify-ca";
    let params = format!("&sslmode=verify-ca&sslrootcert={ca}");
    let encrypted = open_and_check(&uri(&url, "127.0.0.1", label, &params), &url, label);
    assert!(encrypted.unwrap(), "{label}: encrypted, chain verified");

    // ...and refused with another CA.
    let label = "tls-verify-ca-wrong";
    let params = format!("&sslmode=verify-ca&sslrootcert={wrong_ca}");
    let result = open_and_check(&uri(&url, "localhost", label, &params), &url, label);
    let message = refused(result, label);
    assert!(message.contains("certificate check (chain)"), "{message}");

    // require with sslrootcert checks the chain too (libpq: as verify-ca).
    let label = "tls-require-wrong-ca";
    let params = format!("&sslmode=require&sslrootcert={wrong_ca}");
    let result = open_and_check(&uri(&url, "localhost", label, &params), &url, label);
    let message = refused(result, label);
    assert!(message.contains("certificate check (chain)"), "{message}");

    // A server without TLS: require refuses, prefer connects in plain text.
    let label = "plain-require";
    let result = open_and_check(
        &uri(&plain_url, "127.0.0.1", label, "&sslmode=require"),
        &plain_url,
        label,
    );
    let message = refused(result, label);
    assert!(
        message.contains("the server does not offer TLS"),
        "{message}"
    );
    let label = "plain-prefer";
    let params = "&sslmode=prefer";
    let encrypted = open_and_check(
        &uri(&plain_url, "127.0.0.1", label, params),
        &plain_url,
        label,
    );
    assert!(!encrypted.unwrap(), "{label}: plain");
}

#[test]
fn bad_tls_parameters_are_invalid_uris_without_the_password() {
    for (params, expected) in [
        ("sslmode=verify", "sslmode must be"),
        (
            "sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem",
            "cannot read it",
        ),
        (
            "sslmode=verify-full&sslrootcert=/dev/null",
            "no CA certificate",
        ),
        ("sslrootcert=system&sslmode=require", "sslrootcert=system"),
    ] {
        let uri = format!("postgres://me:{PASSWORD}@localhost:1/db?{params}");
        let error = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap_err();
        assert_eq!(error.code(), "INVALID_URI", "{params}: {error}");
        let text = format!("{error} {error:?}");
        assert!(text.contains(expected), "{params}: {text}");
        assert!(!text.contains(PASSWORD), "{params}: {text}");
    }
}
