//! What the target's refusal of one message says (docs/dead-message-queue.md): whether it can make the message poison, and why it
//! is dead-lettered once proven. The judgement the target side makes ([`super::send`]) and the dead message queue
//! ([`super::dmq`]) records, kept apart from both so neither depends on the other's work.

use artemis_core::Error;

/// Why a message was dead-lettered (`_studio_dmq_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The target refused the send itself (an answered send: a large message's last chunk, or the test seam).
    SendFailure,
    /// The target refused the transaction's commit. In a transacted session a send asks for no answer, so a
    /// broker's refusal of a regular message is reported here, with the broker's words in the exception.
    CommitFailure,
    /// The message could not be rebuilt for the target (the client could not encode it).
    TransformFailure,
    /// Reserved (the bridge's name for a message that expired in flight): the relay produces no such case today,
    /// because a target drops an expired message silently rather than refusing it.
    MessageExpired,
}

impl Reason {
    /// The property's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::SendFailure => "SEND_FAILURE",
            Reason::CommitFailure => "COMMIT_FAILURE",
            Reason::TransformFailure => "TRANSFORM_FAILURE",
            Reason::MessageExpired => "MESSAGE_EXPIRED",
        }
    }
}

/// A message of a batch proven poison: the target refused it `attempts` times while others were committed.
#[derive(Debug, Clone)]
pub(crate) struct Poison {
    /// Its place in the batch.
    pub index: usize,
    /// The target's last refusal.
    pub error: Error,
    /// Where the last refusal came.
    pub reason: Reason,
    /// How many one-by-one attempts were refused.
    pub attempts: u32,
}

/// Whether a target's refusal of one message can make it poison: the broker refused it on its own. Never an
/// address full or disk (waits), a missing right (stops), a duplicate (already there), a lost connection, a
/// timeout or a broker not ready (retries), nor a local spool error.
pub(crate) fn may_be_poison(e: &Error) -> bool {
    use artemis_core::ExceptionType as T;
    match e {
        Error::Broker(b) => {
            let waits_stops_or_retries = e.is_duplicate_id()
                || e.is_address_full()
                || e.is_not_authorized()
                || matches!(
                    b.kind,
                    T::SessionCreationRejected
                        | T::NotConnected
                        | T::ConnectionTimedOut
                        | T::Disconnected
                        | T::Unblocked
                        | T::RemoteDisconnect
                        | T::ObjectClosed
                        | T::TransactionOutcomeUnknown
                        | T::TransactionTimeout
                );
            !waits_stops_or_retries
        }
        Error::InvalidArgument(_) => true,
        _ => false,
    }
}

/// The reason for a refusal that came at `send` (`committing` false) or at the commit.
pub(crate) fn reason_of(e: &Error, committing: bool) -> Reason {
    match e {
        Error::InvalidArgument(_) => Reason::TransformFailure,
        _ if committing => Reason::CommitFailure,
        _ => Reason::SendFailure,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use artemis_core::{BrokerError, ExceptionType};

    fn broker(kind: ExceptionType, op: &'static str) -> Error {
        Error::Broker(BrokerError { kind, code: kind.code(), message: Some("AMQ000000: words".into()), op })
    }

    #[test]
    fn only_a_broker_refusal_of_its_own_may_make_a_message_poison() {
        assert!(may_be_poison(&broker(ExceptionType::IoError, "commit")), "AMQ149005 is an IO_ERROR");
        assert!(may_be_poison(&broker(ExceptionType::GenericException, "send")));
        assert!(may_be_poison(&broker(ExceptionType::InternalError, "commit")));
        assert!(may_be_poison(&Error::InvalidArgument("cannot encode".into())));
        for kind in [
            ExceptionType::AddressFull,
            ExceptionType::DuplicateIdRejected,
            ExceptionType::SecurityException,
            ExceptionType::SessionCreationRejected,
            ExceptionType::Disconnected,
            ExceptionType::TransactionOutcomeUnknown,
        ] {
            assert!(!may_be_poison(&broker(kind, "commit")), "{kind:?} must wait, stop or retry");
        }
        let lost = Error::ConnectionLost(artemis_core::CloseReason::CallTimeout {
            op: "commit",
            after: Duration::from_secs(1),
        });
        assert!(!may_be_poison(&lost));
        assert!(!may_be_poison(&Error::Timeout { op: "commit", after: Duration::from_secs(1) }));
        assert!(!may_be_poison(&Error::BodyIo(std::sync::Arc::new(std::io::Error::other("spool")))));
    }

    #[test]
    fn the_reason_says_where_the_refusal_came() {
        let e = broker(ExceptionType::IoError, "commit");
        assert_eq!(reason_of(&e, true), Reason::CommitFailure);
        assert_eq!(reason_of(&e, false), Reason::SendFailure);
        assert_eq!(reason_of(&Error::InvalidArgument("x".into()), true), Reason::TransformFailure);
    }
}
