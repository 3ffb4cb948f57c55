//! An async client for the Apache ActiveMQ Artemis **Core** protocol.
//!
//! The crate knows nothing of transfers, Postgres or HTTP. It has two layers:
//!
//! | layer | job | may depend on |
//! |---|---|---|
//! | [`protocol`] | the wire format: frames, packets, messages, typed properties, large-message chunking; pure, no I/O | `bytes`, `thiserror`, `std` |
//! | [`Connection`], [`Session`], [`Consumer`], [`Browser`], [`Producer`] | one task owns the socket; handles talk to it | `protocol`, tokio |
//!
//! Which layer handles which packet (section numbers refer to `core-protocol.md`):
//!
//! | packet | protocol | connection task | session | consumer / browser / producer |
//! |---|---|---|---|---|
//! | PING (10) | codec | sends one every TTL/2; the echo feeds the watchdog; never answers (§6.2) | – | – |
//! | DISCONNECT* (11/124/−19/13) | codec | fails everything with the reason (§6.3) | – | – |
//! | CREATESESSION(_RESP) (30/31) | codec | the handshake before the task; later ones as calls on channel 1 | – | – |
//! | NULL_RESPONSE (21), EXCEPTION (20) | codec | matched to the waiting call by correlation id or order (§4.2) | gets the result | gets the result |
//! | SESS_START/STOP/COMMIT/ROLLBACK/CLOSE | codec | writes, matches | **initiates** | – |
//! | SESS_QUEUEQUERY, SESS_BINDINGQUERY, CREATE_QUEUE_V2, DELETE_QUEUE | codec | writes, matches | **initiates** (`admin`) | – |
//! | SESS_SEND / _LARGE / _CONTINUATION (71/72/73) | codec, `large` | writes | – | producer **initiates** |
//! | SESS_RECEIVE_MSG / _LARGE_MSG / _CONTINUATION (75/76/77) | codec | routes by consumer id, stamped with the rollback generation | – | consumer **handles** (credits) |
//! | SESS_FLOWTOKEN (70), SESS_INDIVIDUAL_ACKNOWLEDGE (81) | codec | writes | – | consumer **initiates** |
//! | SESS_FORCE_CONSUMER_DELIVERY (78) | codec | writes | – | browser **initiates** (end detection, §10) |
//! | DISCONNECT_CONSUMER (12) | codec | routes | – | consumer ends |
//! | SESS_PRODUCER_REQUEST_CREDITS (79) / _CREDITS (80) / _FAIL_CREDITS (82) | codec | writes; routes the answers to the session | holds the credits | flow-controlled producer **initiates** (§8.6) |
//!
//! ```no_run
//! # async fn demo() -> Result<(), artemis_core::Error> {
//! use std::time::Duration;
//! use artemis_core::{Connection, ConnectOptions, ConsumerOptions, SessionOptions, message};
//!
//! let opts = ConnectOptions::new("127.0.0.1", 61616).credentials("user", "password");
//! let conn = Connection::connect(&opts).await?;
//! let session = conn.create_session(SessionOptions::transacted()).await?;
//! let mut msg = message::durable_message("orders");
//! msg.set_text(Some("hello"));
//! session.producer(None).send(&msg).await?;
//! session.commit().await?;
//!
//! let mut consumer = session.create_consumer("orders", ConsumerOptions::default()).await?;
//! session.start().await?;
//! if let Some(delivery) = consumer.recv(Duration::from_secs(5)).await? {
//!     consumer.ack(&delivery).await?;
//! }
//! session.commit().await?;
//! conn.close().await
//! # }
//! ```
#![warn(missing_docs, missing_debug_implementations)]

pub mod admin;
mod browser;
mod connection;
mod consumer;
pub mod error;
pub mod message;
mod options;
mod producer;
pub mod protocol;
mod session;
pub mod tls;

pub use admin::{AddressInfo, QueueConfig, QueueInfo, RoutingType};
pub use browser::Browser;
pub use connection::Connection;
pub use consumer::{Consumer, Delivery};
pub use error::{BrokerError, CloseReason, Error, ProtocolError, ProtocolErrorKind, Result};
pub use options::{ConnectOptions, ConsumerOptions, SessionOptions, Window};
pub use producer::{Producer, SendConfirmation};
pub use protocol::{
    CoreMessage, ExceptionType, MessageHeaders, MessageType, PropertyValue, ProtocolVersion, TypedProperties,
};
pub use session::Session;
pub use tls::{ClientIdentity, KeyPassphrase, TlsError, TlsFailure, TlsOptions};
