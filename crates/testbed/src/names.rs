//! Unique queue names, so tests can run in parallel on the same brokers without seeing each other's messages.

use std::sync::atomic::{AtomicU32, Ordering};

/// A queue or address name unique to this call: `t.<label>.<random>.<counter>`.
///
/// The label should be the test's name, so a leftover queue on a broker says which test made it.
pub fn unique_name(label: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let label: String =
        label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("t.{label}.{}.{}", &random[..8], COUNTER.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_safe() {
        let a = unique_name("some test::with spaces");
        let b = unique_name("some test::with spaces");
        assert_ne!(a, b);
        assert!(a.starts_with("t.some_test__with_spaces."), "{a}");
    }
}
