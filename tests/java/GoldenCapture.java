// Golden bytes for the Rust Core codec, taken from the official Java Core client's own traffic.
//
//   java -cp <build>:<ARTEMIS_HOME>/lib/* GoldenCapture --url tcp://HOST:PORT --user X --password P
//        --queue Q --out DIR
//
// A recording TCP proxy in this process sits between the Core client (org.apache.activemq.artemis.api.core.client,
// the jars of the broker's own distribution) and the broker; the client runs a fixed scenario through it
// (session, queue query and creation, sends of every body type with every property type, a large message, a
// browser, a consumer with credits and individual acks, commits, two broker exceptions, pings). Afterwards the
// two byte streams are cut into frames by their length field only, and the frames named in RULES are written to
// DIR as <name>.bin, exactly as they crossed the socket. DIR also gets transcript.txt (every frame in order) and
// capture.json (what the Rust tests need to know about the run: versions, queue names). Values the scenario sets
// (user ids, timestamps, bodies, properties) are fixed, so a new capture differs only in names, ids and UUIDs.
//
// The Rust side (crates/artemis-core/tests/codec/golden.rs) decodes every file with our codec and checks it.

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.QueueConfiguration;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.api.core.client.ActiveMQClient;
import org.apache.activemq.artemis.api.core.client.ClientConsumer;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientProducer;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;
import org.apache.activemq.artemis.jms.client.ActiveMQBytesMessage;
import org.apache.activemq.artemis.jms.client.ActiveMQMapMessage;
import org.apache.activemq.artemis.jms.client.ActiveMQObjectMessage;
import org.apache.activemq.artemis.jms.client.ActiveMQStreamMessage;
import org.apache.activemq.artemis.jms.client.ActiveMQTextMessage;
import org.apache.activemq.artemis.utils.UUID;
import org.apache.activemq.artemis.utils.VersionLoader;

public final class GoldenCapture {

    /** Non-ASCII text with a surrogate pair (𝄞) and a NUL, so every string form is really exercised. */
    static final String TEXT = "golden ✓ 日本語 𝄞 \u0000 end";

    /** Fixed header values, so that a new capture reproduces the same message bytes. */
    static final long TIMESTAMP = 1_700_000_000_000L;
    static final long EXPIRATION = 1_900_000_000_000L;

    /** Body kinds, in the order they are sent (and therefore delivered). */
    static final String[] KINDS = {"text", "bytes", "map", "stream", "object", "default"};

    /** Which captured frames become golden files: direction, packet type, its ordinal among frames of that
     *  direction and type on the scenario's connection, the file name, and what it is. */
    record Rule(String dir, int type, int ordinal, String name, String what) {}

    static final List<Rule> RULES = List.of(
        new Rule("c2s", -18, 0, "c2s-createsession", "CREATESESSION_V2: transacted sends and acks, user and password, minLargeMessageSize 1024"),
        new Rule("s2c", 31, 0, "s2c-createsession-resp", "CREATESESSION_RESP: the server's protocol version"),
        new Rule("c2s", 113, 0, "c2s-subscribe-topology", "SUBSCRIBE_TOPOLOGY_V2 (a type our codec does not model)"),
        new Rule("s2c", -17, 0, "s2c-cluster-topology", "CLUSTER_TOPOLOGY_V4 (a type our codec does not model)"),
        new Rule("c2s", 45, 0, "c2s-queuequery", "SESS_QUEUEQUERY for the scenario's queue"),
        new Rule("s2c", -14, 0, "s2c-queuequery-resp-missing", "SESS_QUEUEQUERY_RESP_V3: the queue does not exist yet"),
        new Rule("c2s", -12, 0, "c2s-create-queue", "CREATE_QUEUE_V2: durable anycast queue, response asked"),
        new Rule("s2c", 21, 0, "s2c-null-response", "NULL_RESPONSE to CREATE_QUEUE_V2 (no correlation id: -1)"),
        new Rule("s2c", -14, 1, "s2c-queuequery-resp", "SESS_QUEUEQUERY_RESP_V3: the queue exists, empty"),
        new Rule("c2s", 49, 0, "c2s-bindingquery", "SESS_BINDINGQUERY for the queue's address"),
        new Rule("s2c", -22, 0, "s2c-bindingquery-resp", "SESS_BINDINGQUERY_RESP_V5"),
        new Rule("c2s", 79, 0, "c2s-producer-request-credits", "SESS_PRODUCER_REQUEST_CREDITS: the producer window for the address"),
        new Rule("s2c", 80, 0, "s2c-producer-credits", "SESS_PRODUCER_CREDITS: granted"),
        new Rule("c2s", -20, 0, "c2s-create-producer", "CREATE_PRODUCER"),
        new Rule("c2s", 71, 0, "c2s-send-text", "SESS_SEND: TEXT body, every property type, durable, priority 9 (transacted: no response asked)"),
        new Rule("c2s", 71, 1, "c2s-send-bytes", "SESS_SEND: BYTES body, every property type, priority 8"),
        new Rule("c2s", 71, 2, "c2s-send-map", "SESS_SEND: MAP body with a value of every type, every property type, priority 7"),
        new Rule("c2s", 71, 3, "c2s-send-stream", "SESS_SEND: STREAM body with a value of every type, every property type, priority 6"),
        new Rule("c2s", 71, 4, "c2s-send-object", "SESS_SEND: OBJECT body (a serialized java.lang.String), every property type, priority 5"),
        new Rule("c2s", 71, 5, "c2s-send-default", "SESS_SEND: DEFAULT type, empty body, non-durable, priority 4"),
        new Rule("c2s", 43, 0, "c2s-commit", "SESS_COMMIT (V2, with a correlation id)"),
        new Rule("s2c", 21, 1, "s2c-null-response-commit", "NULL_RESPONSE to that SESS_COMMIT, echoing its correlation id"),
        new Rule("c2s", 72, 0, "c2s-send-large", "SESS_SEND_LARGE: headers and properties of a 2500-byte BYTES message, priority 2"),
        new Rule("c2s", 73, 0, "c2s-send-continuation-first", "SESS_SEND_CONTINUATION: first 1024-byte chunk, continues"),
        new Rule("c2s", 73, 1, "c2s-send-continuation-middle", "SESS_SEND_CONTINUATION: second 1024-byte chunk, continues"),
        new Rule("c2s", 73, 2, "c2s-send-continuation-last", "SESS_SEND_CONTINUATION: last 452-byte chunk with the body size"),
        new Rule("c2s", 40, 0, "c2s-createconsumer", "SESS_CREATECONSUMER: the queue, no filter, not browse-only"),
        new Rule("s2c", -14, 2, "s2c-createconsumer-resp", "SESS_QUEUEQUERY_RESP_V3 answering SESS_CREATECONSUMER: 7 messages"),
        new Rule("c2s", 70, 0, "c2s-flowtoken", "SESS_FLOWTOKEN: the initial 8192-byte window"),
        new Rule("c2s", 70, 1, "c2s-flowtoken-return", "SESS_FLOWTOKEN: credits given back after consuming half a window"),
        new Rule("c2s", 67, 0, "c2s-start", "SESS_START"),
        new Rule("s2c", 75, 0, "s2c-receive-text", "SESS_RECEIVE_MSG: the TEXT message as the broker delivers it"),
        new Rule("s2c", 75, 1, "s2c-receive-bytes", "SESS_RECEIVE_MSG: BYTES"),
        new Rule("s2c", 75, 2, "s2c-receive-map", "SESS_RECEIVE_MSG: MAP"),
        new Rule("s2c", 75, 3, "s2c-receive-stream", "SESS_RECEIVE_MSG: STREAM"),
        new Rule("s2c", 75, 4, "s2c-receive-object", "SESS_RECEIVE_MSG: OBJECT"),
        new Rule("s2c", 75, 5, "s2c-receive-default", "SESS_RECEIVE_MSG: DEFAULT, empty body, non-durable"),
        new Rule("s2c", 76, 0, "s2c-receive-large", "SESS_RECEIVE_LARGE_MSG: the 2500-byte message"),
        new Rule("s2c", 77, 0, "s2c-receive-continuation-first", "SESS_RECEIVE_CONTINUATION: first chunk, continues"),
        new Rule("s2c", 77, 1, "s2c-receive-continuation-middle", "SESS_RECEIVE_CONTINUATION: second chunk, continues"),
        new Rule("s2c", 77, 2, "s2c-receive-continuation-last", "SESS_RECEIVE_CONTINUATION: last chunk"),
        new Rule("c2s", 81, 0, "c2s-individual-ack", "SESS_INDIVIDUAL_ACKNOWLEDGE of the first delivery (transacted: no response asked)"),
        new Rule("c2s", 74, 0, "c2s-consumer-close", "SESS_CONSUMER_CLOSE"),
        new Rule("s2c", 20, 0, "s2c-exception-no-queue", "EXCEPTION: SESS_CREATECONSUMER on a missing queue (no correlation id)"),
        new Rule("c2s", 43, 4, "c2s-commit-duplicate", "SESS_COMMIT of the transaction holding a duplicate _AMQ_DUPL_ID"),
        new Rule("s2c", 20, 1, "s2c-exception-duplicate", "EXCEPTION: SESS_COMMIT of a transaction holding a duplicate _AMQ_DUPL_ID (correlation id)"),
        new Rule("c2s", 68, 0, "c2s-stop", "SESS_STOP, sent by the client before its rollback"),
        new Rule("c2s", 44, 0, "c2s-rollback", "SESS_ROLLBACK"),
        new Rule("c2s", 40, 2, "c2s-createconsumer-browser", "SESS_CREATECONSUMER: browse-only"),
        new Rule("c2s", 78, 0, "c2s-force-delivery", "SESS_FORCE_CONSUMER_DELIVERY from the browser's receiveImmediate"),
        new Rule("s2c", 75, 6, "s2c-receive-browsed", "SESS_RECEIVE_MSG: a message seen by the browser"),
        new Rule("s2c", 75, 7, "s2c-receive-forced-marker", "SESS_RECEIVE_MSG: the forced-delivery marker that ends the browse"),
        new Rule("c2s", -21, 0, "c2s-remove-producer", "REMOVE_PRODUCER"),
        new Rule("c2s", 35, 0, "c2s-delete-queue", "DELETE_QUEUE"),
        new Rule("c2s", 69, 0, "c2s-session-close", "SESS_CLOSE"),
        new Rule("c2s", 10, 0, "c2s-ping", "PING from the client (its connection TTL)"),
        new Rule("s2c", 10, 0, "s2c-ping", "PING echoed by the broker"));

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = parse(args);
        URI broker = URI.create(require(opts, "url"));
        String user = require(opts, "user");
        String password = require(opts, "password");
        String queue = require(opts, "queue");
        Path out = Paths.get(require(opts, "out"));

        Proxy proxy = new Proxy(new InetSocketAddress(broker.getHost(), broker.getPort()));
        proxy.start();
        int serverVersion = scenario("tcp://127.0.0.1:" + proxy.port(), user, password, queue);
        proxy.finish();

        if (proxy.connections.size() != 1) {
            System.err.println("GoldenCapture: note: " + proxy.connections.size() + " connections; rules apply to the first");
        }
        Files.createDirectories(out);
        try (DirectoryStream<Path> old = Files.newDirectoryStream(out, "*.bin")) {
            for (Path p : old) {
                Files.delete(p);
            }
        }
        Recording rec = proxy.connections.get(0);
        current = rec;
        List<Frame> frames = new ArrayList<>();
        frames.addAll(cut("c2s", rec.c2s.toByteArray(), true));
        frames.addAll(cut("s2c", rec.s2c.toByteArray(), false));
        frames.sort((a, b) -> Long.compare(a.seq, b.seq));

        StringBuilder transcript = new StringBuilder();
        transcript.append("# every frame of the capture, in the order the proxy forwarded it\n");
        transcript.append("# seq dir type channel wire-bytes\n");
        Map<String, Integer> ordinals = new HashMap<>();
        Map<String, byte[]> chosen = new LinkedHashMap<>();
        for (Frame f : frames) {
            String key = f.dir + " " + f.type;
            int ordinal = ordinals.merge(key, 1, Integer::sum) - 1;
            String name = "";
            for (Rule r : RULES) {
                if (r.dir.equals(f.dir) && r.type == f.type && r.ordinal == ordinal) {
                    name = r.name;
                    chosen.put(r.name, f.bytes);
                }
            }
            transcript.append(String.format("%4d %s %4d %3d %6d %s%n", f.seq, f.dir, f.type, f.channel, f.bytes.length, name));
        }
        for (Rule r : RULES) {
            byte[] b = chosen.get(r.name);
            if (b == null) {
                throw new IllegalStateException("no frame for rule " + r + "; see the transcript:\n" + transcript);
            }
            Files.write(out.resolve(r.name + ".bin"), b);
        }
        Files.writeString(out.resolve("transcript.txt"), transcript.toString());

        StringBuilder json = new StringBuilder("{\n");
        json.append("  \"client_version\": ").append(quote(VersionLoader.getVersion().getFullVersion())).append(",\n");
        json.append("  \"server_protocol_version\": ").append(serverVersion).append(",\n");
        json.append("  \"queue\": ").append(quote(queue)).append(",\n");
        json.append("  \"missing_queue\": ").append(quote(queue + ".missing")).append(",\n");
        json.append("  \"user\": ").append(quote(user)).append(",\n");
        json.append("  \"files\": {\n");
        for (int i = 0; i < RULES.size(); i++) {
            Rule r = RULES.get(i);
            json.append("    ").append(quote(r.name + ".bin")).append(": ").append(quote(r.what));
            json.append(i + 1 < RULES.size() ? ",\n" : "\n");
        }
        json.append("  }\n}\n");
        Files.writeString(out.resolve("capture.json"), json.toString());
        System.err.println("GoldenCapture: " + frames.size() + " frames, " + RULES.size() + " golden files in " + out);
    }

    // ------------------------------------------------------------------------------------------ scenario

    /** Runs the scenario through the proxy; returns the server's protocol version. */
    static int scenario(String url, String user, String password, String queue) throws Exception {
        SimpleString q = SimpleString.of(queue);
        try (ServerLocator locator = ActiveMQClient.createServerLocator(url)) {
            locator.setMinLargeMessageSize(1024);     // a small large message: 3 chunks of at most 1024 bytes
            locator.setConsumerWindowSize(8192);      // credits come back within the scenario
            locator.setClientFailureCheckPeriod(500); // the client pings within the scenario
            locator.setConnectionTTL(60_000);
            locator.setBlockOnDurableSend(true);      // the defaults, spelled out: durable sends ask for a response,
            locator.setBlockOnNonDurableSend(false);  // non-durable ones do not
            try (ClientSessionFactory sf = locator.createSessionFactory();
                 ClientSession session = sf.createSession(user, password, false, false, false, false, 0)) {
                int serverVersion = session.getVersion();
                if (session.queueQuery(q).isExists()) {
                    throw new IllegalStateException("queue " + queue + " exists already: use a fresh name");
                }
                session.createQueue(QueueConfiguration.of(q).setRoutingType(RoutingType.ANYCAST).setDurable(true));
                session.queueQuery(q);
                session.addressQuery(q);

                ClientProducer producer = session.createProducer(q);
                for (int i = 0; i < KINDS.length; i++) {
                    producer.send(message(session, KINDS[i], i));
                }
                session.commit();

                ClientMessage large = session.createMessage(Message.BYTES_TYPE, true, EXPIRATION, TIMESTAMP + 10, (byte) 2);
                large.setUserID(userId(10));
                large.putStringProperty("kind", "large");
                byte[] body = new byte[2500];
                for (int k = 0; k < body.length; k++) {
                    body[k] = (byte) (k * 7);
                }
                large.getBodyBuffer().writeBytes(body);
                producer.send(large);
                session.commit();

                // A consumer with credits: every message, individually acknowledged, then one commit.
                ClientConsumer consumer = session.createConsumer(q);
                session.start();
                // A known count, so that no receive times out (that would add a forced delivery).
                for (int i = 0; i < KINDS.length + 1; i++) {
                    ClientMessage m = consumer.receive(5000);
                    if (m == null) {
                        throw new IllegalStateException("message " + i + " did not arrive");
                    }
                    m.getBodyBuffer().readableBytes(); // a large body is read in whole, as an application would
                    m.individualAcknowledge();
                }
                session.commit();
                consumer.close();

                // EXCEPTION without a correlation id: a consumer on a missing queue.
                try {
                    session.createConsumer(queue + ".missing");
                    throw new IllegalStateException("a consumer on a missing queue was created");
                } catch (ActiveMQException expected) {
                    System.err.println("GoldenCapture: expected: " + expected);
                }

                // EXCEPTION with a correlation id: the commit of a transaction holding a duplicate id.
                String dup = queue + ".dup";
                ClientMessage first = session.createMessage(true);
                first.putStringProperty(Message.HDR_DUPLICATE_DETECTION_ID, dup);
                producer.send(first);
                session.commit();
                ClientMessage second = session.createMessage(true);
                second.putStringProperty(Message.HDR_DUPLICATE_DETECTION_ID, dup);
                producer.send(second);
                try {
                    session.commit();
                    throw new IllegalStateException("a duplicate id was committed");
                } catch (ActiveMQException expected) {
                    System.err.println("GoldenCapture: expected: " + expected);
                }
                session.rollback();

                // A browser on the queue (the committed duplicate-id message is left): it sees that message, then
                // receiveImmediate finds the end with a forced-delivery marker.
                ClientConsumer browser = session.createConsumer(q, true);
                if (browser.receive(5000) == null) {
                    throw new IllegalStateException("the browser did not see the committed duplicate-id message");
                }
                if (browser.receiveImmediate() != null) {
                    throw new IllegalStateException("the browser found a second message");
                }
                browser.close();
                producer.close();

                Thread.sleep(1200); // at least two client pings and their echoes
                session.deleteQueue(q);
                return serverVersion;
            }
        }
    }

    /** A message of `kind` with every property type and fixed headers; bodies by the official JMS encoders. */
    static ClientMessage message(ClientSession session, String kind, int i) throws Exception {
        ClientMessage core;
        switch (kind) {
            case "text": {
                ActiveMQTextMessage m = new ActiveMQTextMessage(session);
                m.setText(TEXT);
                m.doBeforeSend();
                core = m.getCoreMessage();
                break;
            }
            case "bytes": {
                ActiveMQBytesMessage m = new ActiveMQBytesMessage(session) { };
                m.writeBytes(new byte[] {0, 1, 2, 3, 0x7f, (byte) 0x80, (byte) 0xfe, (byte) 0xff});
                m.doBeforeSend();
                core = m.getCoreMessage();
                break;
            }
            case "map": {
                ActiveMQMapMessage m = new ActiveMQMapMessage(session) { };
                m.setBoolean("bool", true);
                m.setByte("byte", (byte) -7);
                m.setShort("short", (short) -30000);
                m.setInt("int", Integer.MIN_VALUE);
                m.setLong("long", Long.MAX_VALUE);
                m.setFloat("float", 1.5f);
                m.setDouble("double", -2.25e300);
                m.setChar("char", 'ж');
                m.setString("string", TEXT);
                m.setBytes("bytes", new byte[] {0, 1, -1, 127, -128});
                m.setObject("null", null);
                m.doBeforeSend();
                core = m.getCoreMessage();
                break;
            }
            case "stream": {
                ActiveMQStreamMessage m = new ActiveMQStreamMessage(session) { };
                m.writeBoolean(true);
                m.writeByte((byte) -7);
                m.writeShort((short) -30000);
                m.writeChar('ж');
                m.writeInt(Integer.MIN_VALUE);
                m.writeLong(Long.MAX_VALUE);
                m.writeFloat(1.5f);
                m.writeDouble(-2.25e300);
                m.writeString(TEXT);
                m.writeString(null);
                m.writeBytes(new byte[] {9, 8, 7});
                m.doBeforeSend();
                core = m.getCoreMessage();
                break;
            }
            case "object": {
                ActiveMQObjectMessage m = new ActiveMQObjectMessage(session, null) { };
                m.setObject("golden object");
                m.doBeforeSend();
                core = m.getCoreMessage();
                break;
            }
            case "default": {
                core = session.createMessage(Message.DEFAULT_TYPE, false);
                break;
            }
            default:
                throw new IllegalArgumentException(kind);
        }
        core.setUserID(userId(i));
        core.setTimestamp(TIMESTAMP + i);
        core.setExpiration(i % 2 == 0 ? EXPIRATION : 0L);
        core.setPriority((byte) (9 - i)); // descending: delivered in the order sent
        core.putStringProperty("kind", kind);
        core.putBooleanProperty("p_bool", true);
        core.putByteProperty("p_byte", (byte) -7);
        core.putShortProperty("p_short", (short) -30000);
        core.putIntProperty("p_int", Integer.MIN_VALUE);
        core.putLongProperty("p_long", Long.MAX_VALUE);
        core.putFloatProperty("p_float", 1.5f);
        core.putDoubleProperty("p_double", -2.25e300);
        core.putCharProperty("p_char", 'ж');
        core.putStringProperty("p_string", TEXT);
        core.putBytesProperty("p_bytes", new byte[] {0, 1, -1, 127, -128});
        core.putObjectProperty("p_null", null);
        return core;
    }

    /** A fixed 16-byte user id (the JMSMessageID) per message: 00 01 02 ... 0e, then the index. */
    static UUID userId(int i) {
        byte[] b = new byte[16];
        for (int k = 0; k < 15; k++) {
            b[k] = (byte) k;
        }
        b[15] = (byte) i;
        return new UUID(UUID.TYPE_TIME_BASED, b);
    }

    // ------------------------------------------------------------------------------------------ proxy

    /** One accepted client connection: both byte streams as they were forwarded. */
    static final class Recording {
        final ByteArrayOutputStream c2s = new ByteArrayOutputStream();
        final ByteArrayOutputStream s2c = new ByteArrayOutputStream();
        /** For each direction, the global sequence number at which each byte offset arrived (frame order). */
        final List<long[]> c2sMarks = new ArrayList<>();
        final List<long[]> s2cMarks = new ArrayList<>();
    }

    /** A recording TCP proxy on 127.0.0.1 that forwards every accepted connection to the broker. */
    static final class Proxy {
        final InetSocketAddress target;
        final ServerSocket server;
        final List<Recording> connections = new ArrayList<>();
        final List<Thread> pumps = new ArrayList<>();
        static long clock;

        Proxy(InetSocketAddress target) throws IOException {
            this.target = target;
            this.server = new ServerSocket(0, 10, InetAddress.getLoopbackAddress());
        }

        int port() {
            return server.getLocalPort();
        }

        void start() {
            Thread acceptor = new Thread(() -> {
                while (!server.isClosed()) {
                    try {
                        Socket client = server.accept();
                        Socket upstream = new Socket(target.getAddress(), target.getPort());
                        client.setTcpNoDelay(true);
                        upstream.setTcpNoDelay(true);
                        Recording rec = new Recording();
                        synchronized (connections) {
                            connections.add(rec);
                        }
                        pump(client, upstream, rec.c2s, rec.c2sMarks);
                        pump(upstream, client, rec.s2c, rec.s2cMarks);
                    } catch (IOException e) {
                        if (!server.isClosed()) {
                            e.printStackTrace();
                        }
                    }
                }
            }, "proxy-accept");
            acceptor.setDaemon(true);
            acceptor.start();
        }

        void pump(Socket from, Socket to, ByteArrayOutputStream record, List<long[]> marks) {
            Thread t = new Thread(() -> {
                byte[] buf = new byte[64 * 1024];
                try (InputStream in = from.getInputStream()) {
                    OutputStream o = to.getOutputStream();
                    for (int n; (n = in.read(buf)) > 0; ) {
                        // Record before forwarding: whatever the far side answers comes after it in sequence.
                        synchronized (Proxy.class) {
                            marks.add(new long[] {record.size(), clock++});
                            record.write(buf, 0, n);
                        }
                        o.write(buf, 0, n);
                        o.flush();
                    }
                } catch (IOException e) {
                    // The other side closed: the connection is over.
                } finally {
                    try {
                        to.shutdownOutput();
                    } catch (IOException ignored) {
                        // already closed
                    }
                }
            }, "proxy-pump");
            t.setDaemon(true);
            synchronized (pumps) {
                pumps.add(t);
            }
            t.start();
        }

        /** Waits for every pump to see its connection end, then stops accepting. */
        void finish() throws Exception {
            for (Thread t : new ArrayList<>(pumps)) {
                t.join(10_000);
                if (t.isAlive()) {
                    throw new IllegalStateException("a proxied connection did not end");
                }
            }
            server.close();
        }
    }

    // ------------------------------------------------------------------------------------------ frames

    static final class Frame {
        String dir;
        int type;
        long channel;
        byte[] bytes;
        long seq;
    }

    /** Cuts a stream into frames by the length field alone; the client stream starts with the preamble. */
    static List<Frame> cut(String dir, byte[] stream, boolean preamble) {
        int pos = 0;
        if (preamble) {
            byte[] expected = "ARTEMIS".getBytes(StandardCharsets.US_ASCII);
            for (int k = 0; k < expected.length; k++) {
                if (stream[k] != expected[k]) {
                    throw new IllegalStateException("the client did not start with the ARTEMIS preamble");
                }
            }
            pos = expected.length;
        }
        List<Frame> frames = new ArrayList<>();
        ByteBuffer b = ByteBuffer.wrap(stream);
        int index = 0;
        while (pos < stream.length) {
            int len = b.getInt(pos);
            Frame f = new Frame();
            f.dir = dir;
            f.type = b.get(pos + 4);
            f.channel = b.getLong(pos + 5);
            f.bytes = java.util.Arrays.copyOfRange(stream, pos, pos + 4 + len);
            // Order frames across directions by when their last byte arrived at the proxy.
            f.seq = sequenceOf(dir, pos + 4 + len - 1) * 10_000L + index++;
            frames.add(f);
            pos += 4 + len;
        }
        if (pos != stream.length) {
            throw new IllegalStateException(dir + " stream ends inside a frame");
        }
        return frames;
    }

    static Recording current;

    static long sequenceOf(String dir, int offset) {
        List<long[]> marks = dir.equals("c2s") ? current.c2sMarks : current.s2cMarks;
        long seq = 0;
        for (long[] m : marks) {
            if (m[0] <= offset) {
                seq = m[1];
            } else {
                break;
            }
        }
        return seq;
    }

    // ------------------------------------------------------------------------------------------ arguments

    static String quote(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    static Map<String, String> parse(String[] args) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                usage("unexpected argument " + args[i]);
            }
            m.put(args[i].substring(2), args[i + 1]);
        }
        return m;
    }

    static String require(Map<String, String> opts, String key) {
        String v = opts.get(key);
        if (v == null) {
            usage("missing --" + key);
        }
        return v;
    }

    static void usage(String why) {
        System.err.println("GoldenCapture: " + why);
        System.err.println("usage: GoldenCapture --url tcp://HOST:PORT --user X --password P --queue Q --out DIR");
        System.exit(2);
    }
}
