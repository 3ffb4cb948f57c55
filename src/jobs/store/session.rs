//! Statements on the session itself, not on a table.

use std::time::Duration;

/// The statement that opens a transaction whose idle time Postgres bounds by `idle` (at least a millisecond: zero
/// would mean "never"): Postgres ends the session if the transaction sits idle longer. `BEGIN` and the bound go as
/// one simple query, so the bound costs no round trip of its own; `SET LOCAL` ends with the transaction. The value is
/// a number this function formats, never caller text.
pub fn begin_bounded(idle: Duration) -> String {
    format!("BEGIN; SET LOCAL idle_in_transaction_session_timeout = {}", idle.as_millis().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_in_milliseconds_and_never_zero() {
        assert_eq!(
            begin_bounded(Duration::from_secs(30)),
            "BEGIN; SET LOCAL idle_in_transaction_session_timeout = 30000"
        );
        assert!(begin_bounded(Duration::ZERO).ends_with("= 1"));
    }
}
