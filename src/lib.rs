//! artemis-transfer
