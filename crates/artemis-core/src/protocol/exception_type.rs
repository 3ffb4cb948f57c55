//! The `ActiveMQExceptionType` codes that an EXCEPTION packet carries, with their
//! Java names (`artemis-commons/.../api/core/ActiveMQExceptionType.java` at 2.40.0,
//! `core-protocol.md` §13).

use std::fmt;

macro_rules! exception_types {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $name:literal; )*) => {
        /// An `ActiveMQExceptionType`. Codes the table does not know map to
        /// [`ExceptionType::GenericException`], as Java's `getType` does; the
        /// EXCEPTION packet keeps the raw code as well.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ExceptionType {
            $( $(#[$doc])* $variant, )*
        }

        impl ExceptionType {
            /// Every known type, in the Java declaration order.
            pub const ALL: &'static [ExceptionType] = &[$(ExceptionType::$variant,)*];

            /// The numeric code on the wire.
            pub const fn code(self) -> i32 {
                match self { $(ExceptionType::$variant => $code,)* }
            }

            /// The Java enum constant name (verbatim, including Java's own typo
            /// `NOT_IMPLEMTNED_EXCEPTION`).
            pub const fn name(self) -> &'static str {
                match self { $(ExceptionType::$variant => $name,)* }
            }

            /// The type for a code, `None` if the code is unknown.
            pub const fn try_from_code(code: i32) -> Option<ExceptionType> {
                match code { $($code => Some(ExceptionType::$variant),)* _ => None }
            }

            /// The type for a Java name.
            pub fn from_name(name: &str) -> Option<ExceptionType> {
                match name { $($name => Some(ExceptionType::$variant),)* _ => None }
            }
        }
    };
}

exception_types! {
    /// An unexpected Throwable on the server.
    InternalError = 0, "INTERNAL_ERROR";
    /// Unsupported packet.
    UnsupportedPacket = 1, "UNSUPPORTED_PACKET";
    /// Not connected.
    NotConnected = 2, "NOT_CONNECTED";
    /// Connection timed out.
    ConnectionTimedOut = 3, "CONNECTION_TIMEDOUT";
    /// Disconnected.
    Disconnected = 4, "DISCONNECTED";
    /// A blocking call was unblocked by failover.
    Unblocked = 5, "UNBLOCKED";
    /// Journal or disk error.
    IoError = 6, "IO_ERROR";
    /// `AMQ229017: Queue … does not exist`.
    QueueDoesNotExist = 100, "QUEUE_DOES_NOT_EXIST";
    /// `AMQ229019`: queue already exists.
    QueueExists = 101, "QUEUE_EXISTS";
    /// Object closed.
    ObjectClosed = 102, "OBJECT_CLOSED";
    /// `AMQ229020: Invalid filter`.
    InvalidFilterExpression = 103, "INVALID_FILTER_EXPRESSION";
    /// Illegal state (unknown message or consumer, queue with consumers, …).
    IllegalState = 104, "ILLEGAL_STATE";
    /// Authentication or authorization failure.
    SecurityException = 105, "SECURITY_EXCEPTION";
    /// `AMQ229203: Address Does Not Exist`.
    AddressDoesNotExist = 106, "ADDRESS_DOES_NOT_EXIST";
    /// Address already exists.
    AddressExists = 107, "ADDRESS_EXISTS";
    /// `AMQ229033`: protocol version not accepted.
    IncompatibleClientServerVersions = 108, "INCOMPATIBLE_CLIENT_SERVER_VERSIONS";
    /// Error in a large message body.
    LargeMessageErrorBody = 110, "LARGE_MESSAGE_ERROR_BODY";
    /// Transaction rolled back.
    TransactionRolledBack = 111, "TRANSACTION_ROLLED_BACK";
    /// `AMQ229034`: server not started.
    SessionCreationRejected = 112, "SESSION_CREATION_REJECTED";
    /// Duplicate `_AMQ_DUPL_ID` inside a transaction.
    DuplicateIdRejected = 113, "DUPLICATE_ID_REJECTED";
    /// Duplicate unique session metadata.
    DuplicateMetadata = 114, "DUPLICATE_METADATA";
    /// Transaction outcome unknown.
    TransactionOutcomeUnknown = 115, "TRANSACTION_OUTCOME_UNKNOWN";
    /// Already replicating.
    AlreadyReplicating = 116, "ALREADY_REPLICATING";
    /// An interceptor rejected the packet.
    InterceptorRejectedPacket = 117, "INTERCEPTOR_REJECTED_PACKET";
    /// Invalid use of a transient queue.
    InvalidTransientQueueUse = 118, "INVALID_TRANSIENT_QUEUE_USE";
    /// Remote disconnect.
    RemoteDisconnect = 119, "REMOTE_DISCONNECT";
    /// Transaction timed out.
    TransactionTimeout = 120, "TRANSACTION_TIMEOUT";
    /// Generic; also the fallback for unknown codes.
    GenericException = 999, "GENERIC_EXCEPTION";
    /// Native AIO: internal error.
    NativeErrorInternal = 200, "NATIVE_ERROR_INTERNAL";
    /// Native AIO: invalid buffer.
    NativeErrorInvalidBuffer = 201, "NATIVE_ERROR_INVALID_BUFFER";
    /// Native AIO: not aligned.
    NativeErrorNotAligned = 202, "NATIVE_ERROR_NOT_ALIGNED";
    /// Native AIO: cannot initialize.
    NativeErrorCantInitializeAio = 203, "NATIVE_ERROR_CANT_INITIALIZE_AIO";
    /// Native AIO: cannot release.
    NativeErrorCantReleaseAio = 204, "NATIVE_ERROR_CANT_RELEASE_AIO";
    /// Native AIO: cannot open/close file.
    NativeErrorCantOpenCloseFile = 205, "NATIVE_ERROR_CANT_OPEN_CLOSE_FILE";
    /// Native AIO: cannot allocate queue.
    NativeErrorCantAllocateQueue = 206, "NATIVE_ERROR_CANT_ALLOCATE_QUEUE";
    /// Native AIO: preallocate file failed.
    NativeErrorPreallocateFile = 208, "NATIVE_ERROR_PREALLOCATE_FILE";
    /// Native AIO: allocate memory failed.
    NativeErrorAllocateMemory = 209, "NATIVE_ERROR_ALLOCATE_MEMORY";
    /// `AMQ229102: Address "…" is full.` (policy FAIL).
    AddressFull = 210, "ADDRESS_FULL";
    /// Large message interrupted.
    LargeMessageInterrupted = 211, "LARGE_MESSAGE_INTERRUPTED";
    /// Cluster security failure.
    ClusterSecurityException = 212, "CLUSTER_SECURITY_EXCEPTION";
    /// Not implemented (the Java name carries a typo).
    NotImplementedException = 213, "NOT_IMPLEMTNED_EXCEPTION";
    /// Queue's max-consumers reached.
    MaxConsumerLimitExceeded = 214, "MAX_CONSUMER_LIMIT_EXCEEDED";
    /// Routing type not supported by the address.
    UnexpectedRoutingTypeForAddress = 215, "UNEXPECTED_ROUTING_TYPE_FOR_ADDRESS";
    /// Invalid queue configuration.
    InvalidQueueConfiguration = 216, "INVALID_QUEUE_CONFIGURATION";
    /// Address could not be deleted.
    DeleteAddressError = 217, "DELETE_ADDRESS_ERROR";
    /// Null reference.
    NullRef = 218, "NULL_REF";
    /// Shutdown error.
    ShutdownError = 219, "SHUTDOWN_ERROR";
    /// Replication timed out.
    ReplicationTimeoutError = 220, "REPLICATION_TIMEOUT_ERROR";
    /// Divert does not exist.
    DivertDoesNotExist = 221, "DIVERT_DOES_NOT_EXIST";
    /// Connection router redirect (Java retries).
    RoutingException = 222, "ROUTING_EXCEPTION";
    /// Timeout.
    TimeoutException = 223, "TIMEOUT_EXCEPTION";
}

impl ExceptionType {
    /// The type for a code, falling back to [`ExceptionType::GenericException`] for
    /// unknown codes (`ActiveMQExceptionType.getType`).
    pub const fn from_code(code: i32) -> ExceptionType {
        match ExceptionType::try_from_code(code) {
            Some(t) => t,
            None => ExceptionType::GenericException,
        }
    }
}

impl fmt::Display for ExceptionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_and_names_are_unique_and_invertible() {
        let codes: HashSet<i32> = ExceptionType::ALL.iter().map(|t| t.code()).collect();
        let names: HashSet<&str> = ExceptionType::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(codes.len(), ExceptionType::ALL.len());
        assert_eq!(names.len(), ExceptionType::ALL.len());
        for &t in ExceptionType::ALL {
            assert_eq!(ExceptionType::from_code(t.code()), t);
            assert_eq!(ExceptionType::from_name(t.name()), Some(t));
        }
    }

    #[test]
    fn well_known_codes() {
        // core-protocol.md §13, checked against ActiveMQExceptionType.java at 2.40.0.
        assert_eq!(ExceptionType::QueueDoesNotExist.code(), 100);
        assert_eq!(ExceptionType::SecurityException.code(), 105);
        assert_eq!(ExceptionType::IncompatibleClientServerVersions.code(), 108);
        assert_eq!(ExceptionType::DuplicateIdRejected.code(), 113);
        assert_eq!(ExceptionType::AddressFull.code(), 210);
        assert_eq!(ExceptionType::RoutingException.code(), 222);
        assert_eq!(ExceptionType::from_code(100).name(), "QUEUE_DOES_NOT_EXIST");
        assert_eq!(ExceptionType::ALL.len(), 51);
    }

    #[test]
    fn unknown_codes_fall_back_to_generic() {
        assert_eq!(ExceptionType::try_from_code(207), None);
        assert_eq!(ExceptionType::from_code(207), ExceptionType::GenericException);
        assert_eq!(ExceptionType::from_code(-1), ExceptionType::GenericException);
        assert_eq!(ExceptionType::from_name("NOPE"), None);
        assert_eq!(ExceptionType::AddressFull.to_string(), "ADDRESS_FULL (210)");
    }
}
