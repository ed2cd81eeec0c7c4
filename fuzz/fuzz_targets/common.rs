//! Properties every target checks of a refusal.

use clockflake::{Error, Layout};

/// A stable error code: non-empty SCREAMING_SNAKE.
pub fn is_code(code: &str) -> bool {
    !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
}

/// A core refusal: a stable code and a message, both non-empty.
#[allow(dead_code)]
pub fn check_error(error: &Error) {
    assert!(is_code(error.code()), "code {:?}", error.code());
    assert!(!error.to_string().is_empty(), "{error:?} has no message");
}

/// Every preset.
#[allow(dead_code)]
pub fn layouts() -> impl Iterator<Item = Layout> {
    Layout::PRESETS.into_iter().map(|(_, layout)| layout)
}
