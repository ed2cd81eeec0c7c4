//! Secrets in coordinator URIs never reach a message: every URI of `tests/uris/secrets.json`
//! is refused with its stable code, and no form of its secrets (as written, percent-decoded,
//! percent-encoded) appears in the error's Display or Debug output, nor in `redact`.
//! With `CLOCKFLAKE_PG_URL` set (a trust-auth server), generators opened with a password in
//! the URI show none of it in `coordinator()` or their Debug output either.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clockflake::Layout;
use clockflake_lease::{open, redact, LeaseOptions};
use serde_json::Value;

const TABLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/uris/secrets.json");

/// `secret` as written, percent-decoded (leniently), and percent-encoded (every byte but
/// `A-Z a-z 0-9 - . _ ~`, upper and lower case hex).
fn forms(secret: &str) -> Vec<String> {
    let mut decoded = Vec::new();
    let bytes = secret.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let hex = secret
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    let mut encoded = String::new();
    for &byte in bytes {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    let mut all = vec![
        secret.to_owned(),
        String::from_utf8_lossy(&decoded).into_owned(),
        encoded.to_lowercase(),
        encoded,
    ];
    all.dedup();
    all
}

/// The forms of `secrets` that `text` shows.
fn leaks(text: &str, secrets: &[String]) -> Vec<String> {
    secrets
        .iter()
        .flat_map(|secret| forms(secret))
        .filter(|form| text.contains(form.as_str()))
        .collect()
}

fn assert_clean(what: &str, text: &str, secrets: &[String], case: &str) {
    let shown = leaks(text, secrets);
    assert!(
        shown.is_empty(),
        "{case}: {what} shows the secret {shown:?}: {text}"
    );
}

fn cases() -> Vec<(String, String, Vec<String>, String)> {
    let table: Value = serde_json::from_str(&std::fs::read_to_string(TABLE).unwrap()).unwrap();
    let cases: Vec<_> = table["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let text = |key: &str| case[key].as_str().unwrap().to_owned();
            let secrets = case["secrets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_owned())
                .collect();
            (text("id"), text("uri"), secrets, text("code"))
        })
        .collect();
    assert!(cases.len() >= 20, "the table has {} cases", cases.len());
    cases
}

#[test]
fn no_secret_in_any_error() {
    let mut leaked = Vec::new();
    let mut wrong_code = Vec::new();
    for (id, uri, secrets, code) in cases() {
        let mut texts = vec![("redact", redact(&uri))];
        match open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()) {
            Ok(gen) => panic!("{id}: opened {}", gen.coordinator()),
            Err(error) => {
                if error.code() != code {
                    wrong_code.push(format!("{id}: expected {code}, got {error}"));
                }
                texts.push(("Display", error.to_string()));
                texts.push(("Debug", format!("{error:?}")));
                texts.push(("Debug (alternate)", format!("{error:#?}")));
            }
        }
        for (what, text) in texts {
            let shown = leaks(&text, &secrets);
            if !shown.is_empty() {
                leaked.push(format!("{id}: {what} shows {shown:?}: {text}"));
            }
        }
    }
    assert!(
        leaked.is_empty() && wrong_code.is_empty(),
        "{} leaks:\n{}\n{} wrong codes:\n{}",
        leaked.len(),
        leaked.join("\n"),
        wrong_code.len(),
        wrong_code.join("\n")
    );
}

/// `postgres://USER@HOST:PORT/DB` with `:password` after the user name.
fn with_password(url: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, host) = rest.split_once('@').unwrap();
    format!("{scheme}://{user}:{password}@{host}")
}

#[test]
fn no_secret_in_an_open_generator() {
    let Ok(url) = std::env::var("CLOCKFLAKE_PG_URL") else {
        eprintln!("skipped: CLOCKFLAKE_PG_URL is not set");
        return;
    };
    let url = url.split('?').next().unwrap().to_owned();
    let app = format!("secrets-{}", std::process::id());
    let secrets = vec!["Tr0ub@d/or?#x".to_owned(), "Qu3ryS3cret".to_owned()];
    for uri in [
        format!(
            "{}?app={app}&ttl=2s",
            with_password(&url, "Tr0ub%40d%2For%3F%23x")
        ),
        format!("{url}?app={app}&ttl=2s&password=Qu3ryS3cret"),
        format!(
            "{}?app={app}&ttl=2s&password=Qu3ryS3cret",
            with_password(&url, "Tr0ub%40d%2For%3F%23x")
        ),
    ] {
        let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default())
            .unwrap_or_else(|error| panic!("open {}: {error}", redact(&uri)));
        assert_clean("coordinator()", gen.coordinator(), &secrets, &uri);
        assert!(gen.coordinator().contains(&app), "{}", gen.coordinator());
        assert_clean("Debug", &format!("{gen:?}"), &secrets, &uri);
        assert_clean("Debug (alternate)", &format!("{gen:#?}"), &secrets, &uri);
        gen.next_id().unwrap();
        gen.close().unwrap();
    }
}
