//! Coordinator URIs as the lease crate's public API reads them without I/O: `redact` (which
//! runs the one parser every scheme goes through, `url` and host lists included) and
//! `parse_duration` (`ttl`, `reserve`, `max_skew`, the server's `--layout unit=`).
//! Properties: the input, rebuilt around a marked password in its user info and in a
//! `password=` parameter, never shows either password once redacted; an accepted duration
//! round-trips through its value in ms.
//! Not reached: each scheme's own parameter checks (uri/file.rs, postgres.rs, redis.rs,
//! zookeeper's config.rs) run only inside `open`, which creates directories or clients.
#![no_main]

use clockflake_lease::{parse_duration, redact};
use libfuzzer_sys::fuzz_target;

/// A password no parser would make up.
const SECRET: &str = "Zq7SECRETxK";

fuzz_target!(|text: &str| {
    let _ = redact(text);
    if let Some(duration) = parse_duration(text) {
        let ms = duration.as_millis();
        assert_eq!(
            parse_duration(&format!("{ms}ms")),
            Some(duration),
            "{text:?}"
        );
    }
    // SCHEME://USER:SECRET+TAIL@REST, and SECRET+TAIL as the value of a secret parameter
    // (joined with '?', or '&' where the URI has a query already): the fuzzer's text split into
    // the parts around the secrets.
    // The marker outside a secret's place is no leak (URL parsing drops tabs and newlines).
    let plain: String = text
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    if plain.contains(SECRET) {
        return;
    }
    let mut pieces = text.splitn(4, '\u{1}');
    let scheme = pieces.next().unwrap_or("");
    let user = pieces.next().unwrap_or("");
    let tail = pieces.next().unwrap_or("");
    let rest = pieces.next().unwrap_or("");
    let with_query = |before: String, key: &str| {
        let join = if before.contains('?') { '&' } else { '?' };
        format!("{before}{join}{key}={SECRET}{tail}")
    };
    for uri in [
        format!("{scheme}://{user}:{SECRET}{tail}@{rest}"),
        with_query(format!("{scheme}://{user}@{rest}"), "password"),
        with_query(format!("{scheme}://{rest}"), "sslpassword"),
    ] {
        let shown = redact(&uri);
        assert!(!shown.contains(SECRET), "{uri:?} redacted as {shown:?}");
    }
});
