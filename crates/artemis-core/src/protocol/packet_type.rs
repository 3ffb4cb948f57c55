//! One constant per Core packet type code, with the Java name verbatim
//! (`PacketImpl.java` at 2.40.0, `core-protocol.md` §5), so that every code can be
//! grepped against the Java source. Codes are signed bytes.
//!
//! Section numbers in the docs refer to `core-protocol.md`.

/// PING (10): Keep-alive with the connection TTL; the broker echoes it on channel 0 (§6.2).
pub const PING: i8 = 10;
/// DISCONNECT (11): Server → client: the broker closes the connection; V1 shape (§6.3).
pub const DISCONNECT: i8 = 11;
/// DISCONNECT_CONSUMER (12): Server → client: the broker closed one consumer.
pub const DISCONNECT_CONSUMER: i8 = 12;
/// DISCONNECT_CONSUMER_KILL (13): Server → client on channel 1: the connection is being killed.
pub const DISCONNECT_CONSUMER_KILL: i8 = 13;
/// EXCEPTION (20): Server → client: a failed request (§13).
pub const EXCEPTION: i8 = 20;
/// NULL_RESPONSE (21): Server → client: success without data (§4.2).
pub const NULL_RESPONSE: i8 = 21;
/// PACKETS_CONFIRMED (22): Confirmation-window acknowledgement; unused with window −1 (§4.3).
pub const PACKETS_CONFIRMED: i8 = 22;
/// CREATESESSION (30): Client → server on channel 1: open a session (§6.1).
pub const CREATESESSION: i8 = 30;
/// CREATESESSION_RESP (31): Server → client: the session exists; carries the server version.
pub const CREATESESSION_RESP: i8 = 31;
/// REATTACH_SESSION (32): Session reattach after failover; not used.
pub const REATTACH_SESSION: i8 = 32;
/// REATTACH_SESSION_RESP (33): Answer to REATTACH_SESSION; not used.
pub const REATTACH_SESSION_RESP: i8 = 33;
/// CREATE_QUEUE (34): Old queue creation; use CREATE_QUEUE_V2.
pub const CREATE_QUEUE: i8 = 34;
/// DELETE_QUEUE (35): Client → server: delete a queue (§12.4).
pub const DELETE_QUEUE: i8 = 35;
/// CREATE_SHARED_QUEUE (36): Old shared-queue creation; not used.
pub const CREATE_SHARED_QUEUE: i8 = 36;
/// SESS_XA_FAILED (39): XA; not used.
pub const SESS_XA_FAILED: i8 = 39;
/// SESS_CREATECONSUMER (40): Client → server: create a consumer (§9.1).
pub const SESS_CREATECONSUMER: i8 = 40;
/// SESS_ACKNOWLEDGE (41): Client → server: cumulative acknowledgement (§9.4).
pub const SESS_ACKNOWLEDGE: i8 = 41;
/// SESS_EXPIRED (42): Client → server: expire a delivered message.
pub const SESS_EXPIRED: i8 = 42;
/// SESS_COMMIT (43): Client → server: commit the session transaction (§8.4).
pub const SESS_COMMIT: i8 = 43;
/// SESS_ROLLBACK (44): Client → server: roll back the session transaction (§8.4).
pub const SESS_ROLLBACK: i8 = 44;
/// SESS_QUEUEQUERY (45): Client → server: query a queue (§12.1).
pub const SESS_QUEUEQUERY: i8 = 45;
/// SESS_QUEUEQUERY_RESP (46): Queue query answer for versions < 126; not used.
pub const SESS_QUEUEQUERY_RESP: i8 = 46;
/// SESS_BINDINGQUERY (49): Client → server: query an address (§12.2).
pub const SESS_BINDINGQUERY: i8 = 49;
/// SESS_BINDINGQUERY_RESP (50): Binding query answer for old versions; not used.
pub const SESS_BINDINGQUERY_RESP: i8 = 50;
/// SESS_XA_START (51): XA; not used.
pub const SESS_XA_START: i8 = 51;
/// SESS_XA_END (52): XA; not used.
pub const SESS_XA_END: i8 = 52;
/// SESS_XA_COMMIT (53): XA; not used.
pub const SESS_XA_COMMIT: i8 = 53;
/// SESS_XA_PREPARE (54): XA; not used.
pub const SESS_XA_PREPARE: i8 = 54;
/// SESS_XA_RESP (55): XA; not used.
pub const SESS_XA_RESP: i8 = 55;
/// SESS_XA_ROLLBACK (56): XA; not used.
pub const SESS_XA_ROLLBACK: i8 = 56;
/// SESS_XA_JOIN (57): XA; not used.
pub const SESS_XA_JOIN: i8 = 57;
/// SESS_XA_SUSPEND (58): XA; not used.
pub const SESS_XA_SUSPEND: i8 = 58;
/// SESS_XA_RESUME (59): XA; not used.
pub const SESS_XA_RESUME: i8 = 59;
/// SESS_XA_FORGET (60): XA; not used.
pub const SESS_XA_FORGET: i8 = 60;
/// SESS_XA_INDOUBT_XIDS (61): XA; not used.
pub const SESS_XA_INDOUBT_XIDS: i8 = 61;
/// SESS_XA_INDOUBT_XIDS_RESP (62): XA; not used.
pub const SESS_XA_INDOUBT_XIDS_RESP: i8 = 62;
/// SESS_XA_SET_TIMEOUT (63): XA; not used.
pub const SESS_XA_SET_TIMEOUT: i8 = 63;
/// SESS_XA_SET_TIMEOUT_RESP (64): XA; not used.
pub const SESS_XA_SET_TIMEOUT_RESP: i8 = 64;
/// SESS_XA_GET_TIMEOUT (65): XA; not used.
pub const SESS_XA_GET_TIMEOUT: i8 = 65;
/// SESS_XA_GET_TIMEOUT_RESP (66): XA; not used.
pub const SESS_XA_GET_TIMEOUT_RESP: i8 = 66;
/// SESS_START (67): Client → server: start delivery; no response.
pub const SESS_START: i8 = 67;
/// SESS_STOP (68): Client → server: stop delivery; answered with NULL_RESPONSE.
pub const SESS_STOP: i8 = 68;
/// SESS_CLOSE (69): Client → server: close the session; answered with NULL_RESPONSE.
pub const SESS_CLOSE: i8 = 69;
/// SESS_FLOWTOKEN (70): Client → server: consumer credits in bytes (§9.2).
pub const SESS_FLOWTOKEN: i8 = 70;
/// SESS_SEND (71): Client → server: send a regular message (§8.1).
pub const SESS_SEND: i8 = 71;
/// SESS_SEND_LARGE (72): Client → server: headers of a large message (§11.2).
pub const SESS_SEND_LARGE: i8 = 72;
/// SESS_SEND_CONTINUATION (73): Client → server: one chunk of a large message body (§11.2).
pub const SESS_SEND_CONTINUATION: i8 = 73;
/// SESS_CONSUMER_CLOSE (74): Client → server: close a consumer (§6.4).
pub const SESS_CONSUMER_CLOSE: i8 = 74;
/// SESS_RECEIVE_MSG (75): Server → client: a delivered regular message (§9.3).
pub const SESS_RECEIVE_MSG: i8 = 75;
/// SESS_RECEIVE_LARGE_MSG (76): Server → client: headers of a delivered large message (§11.1).
pub const SESS_RECEIVE_LARGE_MSG: i8 = 76;
/// SESS_RECEIVE_CONTINUATION (77): Server → client: one chunk of a delivered large message (§11.1).
pub const SESS_RECEIVE_CONTINUATION: i8 = 77;
/// SESS_FORCE_CONSUMER_DELIVERY (78): Client → server: ask for a forced-delivery marker (§10).
pub const SESS_FORCE_CONSUMER_DELIVERY: i8 = 78;
/// SESS_PRODUCER_REQUEST_CREDITS (79): Client → server: ask for producer credits (§8.6).
pub const SESS_PRODUCER_REQUEST_CREDITS: i8 = 79;
/// SESS_PRODUCER_CREDITS (80): Server → client: producer credits granted (§8.6).
pub const SESS_PRODUCER_CREDITS: i8 = 80;
/// SESS_INDIVIDUAL_ACKNOWLEDGE (81): Client → server: acknowledge one message (§9.4).
pub const SESS_INDIVIDUAL_ACKNOWLEDGE: i8 = 81;
/// SESS_PRODUCER_FAIL_CREDITS (82): Server → client: producer credits refused, address full (§8.6).
pub const SESS_PRODUCER_FAIL_CREDITS: i8 = 82;
/// REPLICATION_RESPONSE (90): Replication; server to server.
pub const REPLICATION_RESPONSE: i8 = 90;
/// REPLICATION_APPEND (91): Replication; server to server.
pub const REPLICATION_APPEND: i8 = 91;
/// REPLICATION_APPEND_TX (92): Replication; server to server.
pub const REPLICATION_APPEND_TX: i8 = 92;
/// REPLICATION_DELETE (93): Replication; server to server.
pub const REPLICATION_DELETE: i8 = 93;
/// REPLICATION_DELETE_TX (94): Replication; server to server.
pub const REPLICATION_DELETE_TX: i8 = 94;
/// REPLICATION_PREPARE (95): Replication; server to server.
pub const REPLICATION_PREPARE: i8 = 95;
/// REPLICATION_COMMIT_ROLLBACK (96): Replication; server to server.
pub const REPLICATION_COMMIT_ROLLBACK: i8 = 96;
/// REPLICATION_PAGE_WRITE (97): Replication; server to server.
pub const REPLICATION_PAGE_WRITE: i8 = 97;
/// REPLICATION_PAGE_EVENT (98): Replication; server to server.
pub const REPLICATION_PAGE_EVENT: i8 = 98;
/// REPLICATION_LARGE_MESSAGE_BEGIN (99): Replication; server to server.
pub const REPLICATION_LARGE_MESSAGE_BEGIN: i8 = 99;
/// REPLICATION_LARGE_MESSAGE_END (100): Replication; server to server.
pub const REPLICATION_LARGE_MESSAGE_END: i8 = 100;
/// REPLICATION_LARGE_MESSAGE_WRITE (101): Replication; server to server.
pub const REPLICATION_LARGE_MESSAGE_WRITE: i8 = 101;
/// REPLICATION_SYNC_FILE (103): Replication; server to server.
pub const REPLICATION_SYNC_FILE: i8 = 103;
/// SESS_ADD_METADATA (104): Client → server: session metadata; always answered with NULL_RESPONSE.
pub const SESS_ADD_METADATA: i8 = 104;
/// SESS_ADD_METADATA2 (105): Client → server: session metadata with a confirmation flag.
pub const SESS_ADD_METADATA2: i8 = 105;
/// SESS_UNIQUE_ADD_METADATA (106): Client → server: unique session metadata (JMS client id).
pub const SESS_UNIQUE_ADD_METADATA: i8 = 106;
/// CLUSTER_TOPOLOGY (110): Topology update; only after a subscription.
pub const CLUSTER_TOPOLOGY: i8 = 110;
/// NODE_ANNOUNCE (111): Cluster; server to server.
pub const NODE_ANNOUNCE: i8 = 111;
/// SUBSCRIBE_TOPOLOGY (112): Client → server: subscribe to topology; not used.
pub const SUBSCRIBE_TOPOLOGY: i8 = 112;
/// SUBSCRIBE_TOPOLOGY_V2 (113): Client → server: subscribe to topology; not used.
pub const SUBSCRIBE_TOPOLOGY_V2: i8 = 113;
/// CLUSTER_TOPOLOGY_V2 (114): Topology update; only after a subscription.
pub const CLUSTER_TOPOLOGY_V2: i8 = 114;
/// BACKUP_REGISTRATION (115): HA; server to server.
pub const BACKUP_REGISTRATION: i8 = 115;
/// BACKUP_REGISTRATION_FAILED (116): HA; server to server.
pub const BACKUP_REGISTRATION_FAILED: i8 = 116;
/// REPLICATION_START_FINISH_SYNC (120): Replication; server to server.
pub const REPLICATION_START_FINISH_SYNC: i8 = 120;
/// REPLICATION_SCHEDULED_FAILOVER (121): Replication; server to server.
pub const REPLICATION_SCHEDULED_FAILOVER: i8 = 121;
/// CLUSTER_TOPOLOGY_V3 (122): Topology update; only after a subscription.
pub const CLUSTER_TOPOLOGY_V3: i8 = 122;
/// DISCONNECT_V2 (124): Server → client: disconnect with a scale-down node (§6.3).
pub const DISCONNECT_V2: i8 = 124;
/// CLUSTER_CONNECT (125): Cluster; server to server.
pub const CLUSTER_CONNECT: i8 = 125;
/// CLUSTER_CONNECT_REPLY (126): Cluster; server to server.
pub const CLUSTER_CONNECT_REPLY: i8 = 126;
/// BACKUP_REQUEST (127): HA; server to server.
pub const BACKUP_REQUEST: i8 = 127;
/// BACKUP_REQUEST_RESPONSE (-1): HA; server to server.
pub const BACKUP_REQUEST_RESPONSE: i8 = -1;
/// QUORUM_VOTE (-2): Quorum; server to server.
pub const QUORUM_VOTE: i8 = -2;
/// QUORUM_VOTE_REPLY (-3): Quorum; server to server.
pub const QUORUM_VOTE_REPLY: i8 = -3;
/// CHECK_FOR_FAILOVER (-4): Failover check; not used.
pub const CHECK_FOR_FAILOVER: i8 = -4;
/// CHECK_FOR_FAILOVER_REPLY (-5): Failover check answer; not used.
pub const CHECK_FOR_FAILOVER_REPLY: i8 = -5;
/// SCALEDOWN_ANNOUNCEMENT (-6): Scale-down; server to server.
pub const SCALEDOWN_ANNOUNCEMENT: i8 = -6;
/// SESS_QUEUEQUERY_RESP_V2 (-7): Queue query answer for versions 126–128; not used.
pub const SESS_QUEUEQUERY_RESP_V2: i8 = -7;
/// SESS_BINDINGQUERY_RESP_V2 (-8): Binding query answer for version 126; not used.
pub const SESS_BINDINGQUERY_RESP_V2: i8 = -8;
/// REPLICATION_RESPONSE_V2 (-9): Replication; server to server.
pub const REPLICATION_RESPONSE_V2: i8 = -9;
/// SESS_BINDINGQUERY_RESP_V3 (-10): Binding query answer for versions 127–128; not used.
pub const SESS_BINDINGQUERY_RESP_V3: i8 = -10;
/// CREATE_ADDRESS (-11): Client → server: create an address (§12.4).
pub const CREATE_ADDRESS: i8 = -11;
/// CREATE_QUEUE_V2 (-12): Client → server: create a queue (§12.3).
pub const CREATE_QUEUE_V2: i8 = -12;
/// CREATE_SHARED_QUEUE_V2 (-13): Shared-queue creation; not used.
pub const CREATE_SHARED_QUEUE_V2: i8 = -13;
/// SESS_QUEUEQUERY_RESP_V3 (-14): Server → client: queue query answer for versions ≥ 129 (§12.1).
pub const SESS_QUEUEQUERY_RESP_V3: i8 = -14;
/// SESS_BINDINGQUERY_RESP_V4 (-15): Server → client: binding query answer for versions 129–134.
pub const SESS_BINDINGQUERY_RESP_V4: i8 = -15;
/// FEDERATION_DOWNSTREAM_CONNECT (-16): Federation; server to server.
pub const FEDERATION_DOWNSTREAM_CONNECT: i8 = -16;
/// CLUSTER_TOPOLOGY_V4 (-17): Topology update; only after a subscription.
pub const CLUSTER_TOPOLOGY_V4: i8 = -17;
/// CREATESESSION_V2 (-18): Client → server on channel 1: CREATESESSION + clientID (version ≥ 131).
pub const CREATESESSION_V2: i8 = -18;
/// DISCONNECT_V3 (-19): Server → client: disconnect with a reason (version ≥ 131, §6.3).
pub const DISCONNECT_V3: i8 = -19;
/// CREATE_PRODUCER (-20): Client → server: register a producer for metrics (version ≥ 134).
pub const CREATE_PRODUCER: i8 = -20;
/// REMOVE_PRODUCER (-21): Client → server: unregister a producer (version ≥ 134).
pub const REMOVE_PRODUCER: i8 = -21;
/// SESS_BINDINGQUERY_RESP_V5 (-22): Server → client: binding query answer for versions ≥ 135 (§12.2).
pub const SESS_BINDINGQUERY_RESP_V5: i8 = -22;

/// Every packet type constant as `(name, code)`, in the order of `PacketImpl.java`.
pub const ALL: &[(&str, i8)] = &[
    ("PING", PING),
    ("DISCONNECT", DISCONNECT),
    ("DISCONNECT_CONSUMER", DISCONNECT_CONSUMER),
    ("DISCONNECT_CONSUMER_KILL", DISCONNECT_CONSUMER_KILL),
    ("EXCEPTION", EXCEPTION),
    ("NULL_RESPONSE", NULL_RESPONSE),
    ("PACKETS_CONFIRMED", PACKETS_CONFIRMED),
    ("CREATESESSION", CREATESESSION),
    ("CREATESESSION_RESP", CREATESESSION_RESP),
    ("REATTACH_SESSION", REATTACH_SESSION),
    ("REATTACH_SESSION_RESP", REATTACH_SESSION_RESP),
    ("CREATE_QUEUE", CREATE_QUEUE),
    ("DELETE_QUEUE", DELETE_QUEUE),
    ("CREATE_SHARED_QUEUE", CREATE_SHARED_QUEUE),
    ("SESS_XA_FAILED", SESS_XA_FAILED),
    ("SESS_CREATECONSUMER", SESS_CREATECONSUMER),
    ("SESS_ACKNOWLEDGE", SESS_ACKNOWLEDGE),
    ("SESS_EXPIRED", SESS_EXPIRED),
    ("SESS_COMMIT", SESS_COMMIT),
    ("SESS_ROLLBACK", SESS_ROLLBACK),
    ("SESS_QUEUEQUERY", SESS_QUEUEQUERY),
    ("SESS_QUEUEQUERY_RESP", SESS_QUEUEQUERY_RESP),
    ("SESS_BINDINGQUERY", SESS_BINDINGQUERY),
    ("SESS_BINDINGQUERY_RESP", SESS_BINDINGQUERY_RESP),
    ("SESS_XA_START", SESS_XA_START),
    ("SESS_XA_END", SESS_XA_END),
    ("SESS_XA_COMMIT", SESS_XA_COMMIT),
    ("SESS_XA_PREPARE", SESS_XA_PREPARE),
    ("SESS_XA_RESP", SESS_XA_RESP),
    ("SESS_XA_ROLLBACK", SESS_XA_ROLLBACK),
    ("SESS_XA_JOIN", SESS_XA_JOIN),
    ("SESS_XA_SUSPEND", SESS_XA_SUSPEND),
    ("SESS_XA_RESUME", SESS_XA_RESUME),
    ("SESS_XA_FORGET", SESS_XA_FORGET),
    ("SESS_XA_INDOUBT_XIDS", SESS_XA_INDOUBT_XIDS),
    ("SESS_XA_INDOUBT_XIDS_RESP", SESS_XA_INDOUBT_XIDS_RESP),
    ("SESS_XA_SET_TIMEOUT", SESS_XA_SET_TIMEOUT),
    ("SESS_XA_SET_TIMEOUT_RESP", SESS_XA_SET_TIMEOUT_RESP),
    ("SESS_XA_GET_TIMEOUT", SESS_XA_GET_TIMEOUT),
    ("SESS_XA_GET_TIMEOUT_RESP", SESS_XA_GET_TIMEOUT_RESP),
    ("SESS_START", SESS_START),
    ("SESS_STOP", SESS_STOP),
    ("SESS_CLOSE", SESS_CLOSE),
    ("SESS_FLOWTOKEN", SESS_FLOWTOKEN),
    ("SESS_SEND", SESS_SEND),
    ("SESS_SEND_LARGE", SESS_SEND_LARGE),
    ("SESS_SEND_CONTINUATION", SESS_SEND_CONTINUATION),
    ("SESS_CONSUMER_CLOSE", SESS_CONSUMER_CLOSE),
    ("SESS_RECEIVE_MSG", SESS_RECEIVE_MSG),
    ("SESS_RECEIVE_LARGE_MSG", SESS_RECEIVE_LARGE_MSG),
    ("SESS_RECEIVE_CONTINUATION", SESS_RECEIVE_CONTINUATION),
    ("SESS_FORCE_CONSUMER_DELIVERY", SESS_FORCE_CONSUMER_DELIVERY),
    ("SESS_PRODUCER_REQUEST_CREDITS", SESS_PRODUCER_REQUEST_CREDITS),
    ("SESS_PRODUCER_CREDITS", SESS_PRODUCER_CREDITS),
    ("SESS_INDIVIDUAL_ACKNOWLEDGE", SESS_INDIVIDUAL_ACKNOWLEDGE),
    ("SESS_PRODUCER_FAIL_CREDITS", SESS_PRODUCER_FAIL_CREDITS),
    ("REPLICATION_RESPONSE", REPLICATION_RESPONSE),
    ("REPLICATION_APPEND", REPLICATION_APPEND),
    ("REPLICATION_APPEND_TX", REPLICATION_APPEND_TX),
    ("REPLICATION_DELETE", REPLICATION_DELETE),
    ("REPLICATION_DELETE_TX", REPLICATION_DELETE_TX),
    ("REPLICATION_PREPARE", REPLICATION_PREPARE),
    ("REPLICATION_COMMIT_ROLLBACK", REPLICATION_COMMIT_ROLLBACK),
    ("REPLICATION_PAGE_WRITE", REPLICATION_PAGE_WRITE),
    ("REPLICATION_PAGE_EVENT", REPLICATION_PAGE_EVENT),
    ("REPLICATION_LARGE_MESSAGE_BEGIN", REPLICATION_LARGE_MESSAGE_BEGIN),
    ("REPLICATION_LARGE_MESSAGE_END", REPLICATION_LARGE_MESSAGE_END),
    ("REPLICATION_LARGE_MESSAGE_WRITE", REPLICATION_LARGE_MESSAGE_WRITE),
    ("REPLICATION_SYNC_FILE", REPLICATION_SYNC_FILE),
    ("SESS_ADD_METADATA", SESS_ADD_METADATA),
    ("SESS_ADD_METADATA2", SESS_ADD_METADATA2),
    ("SESS_UNIQUE_ADD_METADATA", SESS_UNIQUE_ADD_METADATA),
    ("CLUSTER_TOPOLOGY", CLUSTER_TOPOLOGY),
    ("NODE_ANNOUNCE", NODE_ANNOUNCE),
    ("SUBSCRIBE_TOPOLOGY", SUBSCRIBE_TOPOLOGY),
    ("SUBSCRIBE_TOPOLOGY_V2", SUBSCRIBE_TOPOLOGY_V2),
    ("CLUSTER_TOPOLOGY_V2", CLUSTER_TOPOLOGY_V2),
    ("BACKUP_REGISTRATION", BACKUP_REGISTRATION),
    ("BACKUP_REGISTRATION_FAILED", BACKUP_REGISTRATION_FAILED),
    ("REPLICATION_START_FINISH_SYNC", REPLICATION_START_FINISH_SYNC),
    ("REPLICATION_SCHEDULED_FAILOVER", REPLICATION_SCHEDULED_FAILOVER),
    ("CLUSTER_TOPOLOGY_V3", CLUSTER_TOPOLOGY_V3),
    ("DISCONNECT_V2", DISCONNECT_V2),
    ("CLUSTER_CONNECT", CLUSTER_CONNECT),
    ("CLUSTER_CONNECT_REPLY", CLUSTER_CONNECT_REPLY),
    ("BACKUP_REQUEST", BACKUP_REQUEST),
    ("BACKUP_REQUEST_RESPONSE", BACKUP_REQUEST_RESPONSE),
    ("QUORUM_VOTE", QUORUM_VOTE),
    ("QUORUM_VOTE_REPLY", QUORUM_VOTE_REPLY),
    ("CHECK_FOR_FAILOVER", CHECK_FOR_FAILOVER),
    ("CHECK_FOR_FAILOVER_REPLY", CHECK_FOR_FAILOVER_REPLY),
    ("SCALEDOWN_ANNOUNCEMENT", SCALEDOWN_ANNOUNCEMENT),
    ("SESS_QUEUEQUERY_RESP_V2", SESS_QUEUEQUERY_RESP_V2),
    ("SESS_BINDINGQUERY_RESP_V2", SESS_BINDINGQUERY_RESP_V2),
    ("REPLICATION_RESPONSE_V2", REPLICATION_RESPONSE_V2),
    ("SESS_BINDINGQUERY_RESP_V3", SESS_BINDINGQUERY_RESP_V3),
    ("CREATE_ADDRESS", CREATE_ADDRESS),
    ("CREATE_QUEUE_V2", CREATE_QUEUE_V2),
    ("CREATE_SHARED_QUEUE_V2", CREATE_SHARED_QUEUE_V2),
    ("SESS_QUEUEQUERY_RESP_V3", SESS_QUEUEQUERY_RESP_V3),
    ("SESS_BINDINGQUERY_RESP_V4", SESS_BINDINGQUERY_RESP_V4),
    ("FEDERATION_DOWNSTREAM_CONNECT", FEDERATION_DOWNSTREAM_CONNECT),
    ("CLUSTER_TOPOLOGY_V4", CLUSTER_TOPOLOGY_V4),
    ("CREATESESSION_V2", CREATESESSION_V2),
    ("DISCONNECT_V3", DISCONNECT_V3),
    ("CREATE_PRODUCER", CREATE_PRODUCER),
    ("REMOVE_PRODUCER", REMOVE_PRODUCER),
    ("SESS_BINDINGQUERY_RESP_V5", SESS_BINDINGQUERY_RESP_V5),
];

/// The Java name of a packet type code, if it is one.
pub fn name(packet_type: i8) -> Option<&'static str> {
    ALL.iter().find(|(_, c)| *c == packet_type).map(|(n, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique() {
        let codes: HashSet<i8> = ALL.iter().map(|(_, c)| *c).collect();
        assert_eq!(codes.len(), ALL.len());
    }

    #[test]
    fn spot_checks_against_packet_impl() {
        assert_eq!(SESS_SEND, 71);
        assert_eq!(SESS_QUEUEQUERY_RESP_V3, -14);
        assert_eq!(SESS_BINDINGQUERY_RESP_V5, -22);
        assert_eq!(CREATESESSION_V2 as u8, 0xEE);
        assert_eq!(name(-19), Some("DISCONNECT_V3"));
        assert_eq!(name(102), None);
        assert_eq!(name(123), None);
    }
}
