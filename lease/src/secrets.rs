//! Keeping secrets out of messages: a coordinator's errors (the database's, Redis's) may
//! quote what they were given, so every message is scrubbed of the password in every form it
//! may take there. The URI's own redaction is `crate::uri::redact`.

/// `text` with every secret of `secrets` (at least 3 bytes long; ASCII case ignored, for
/// percent-encodings) replaced by `***`.
pub(crate) fn scrub(text: &str, secrets: &[String]) -> String {
    let mut secrets: Vec<&String> = secrets.iter().filter(|s| s.len() >= 3).collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut text = text.to_owned();
    for secret in secrets {
        let needle = secret.to_ascii_lowercase();
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.to_ascii_lowercase().find(&needle) {
            // ASCII lowercasing keeps byte offsets, and `needle` starts and ends where a
            // match of the same bytes does, so both cuts fall on char boundaries.
            out.push_str(&rest[..at]);
            out.push_str("***");
            rest = &rest[at + needle.len()..];
        }
        out.push_str(rest);
        text = out;
    }
    text
}

/// `password` (bytes, as a connection config holds it) as written and percent-encoded
/// (everything but the unreserved `A-Z a-z 0-9 - . _ ~`).
#[cfg(any(feature = "postgres", feature = "redis", feature = "etcd", test))]
pub(crate) fn password_forms(password: &[u8]) -> Vec<String> {
    use percent_encoding::{percent_encode, AsciiSet, NON_ALPHANUMERIC};
    const RESERVED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    vec![
        String::from_utf8_lossy(password).into_owned(),
        percent_encode(password, RESERVED).to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubbing() {
        let secrets = ["P%40ss".to_owned(), "p@ss".to_owned(), "ab".to_owned()];
        assert_eq!(
            scrub("a p%40ss, P@SS and p@ss about tabs", &secrets),
            "a ***, *** and *** about tabs"
        );
        assert_eq!(password_forms(b"a/b"), ["a/b", "a%2Fb"]);
    }
}
