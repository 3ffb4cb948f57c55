//! The Core wire format. Pure: no tokio, no clock, no sockets, no logging.
