// The independent judge of message fidelity: the official Artemis Java client (the jars of the broker's own
// distribution, nothing else) produces messages of every kind, and consumes or browses a queue printing one
// canonical JSON line per message. Tests compare those lines; they never trust our own client to judge itself.
//
//   java -cp <build>:<ARTEMIS_HOME>/lib/* Fidelity produce --url U --user X --password P --queue Q --count N
//        [--prefix ID] [--kinds text,bytes,map,stream,object,bare] [--body-size BYTES] [--batch N]
//        [--scheduled-delay-ms MS]   (each message scheduled for delivery MS after it is sent: _AMQ_SCHED_DELIVERY)
//   java ... Fidelity consume --url U --user X --password P --queue Q [--max N] [--timeout-ms MS]
//   java ... Fidelity browse  --url U --user X --password P --queue Q [--max N] [--filter SELECTOR]
//
// One JSON object per line on stdout, keys sorted; a summary on stderr. The body is judged by the SHA-256 of the
// raw Core body bytes, so every body type is compared byte for byte without interpreting it.

import java.io.ByteArrayInputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import javax.jms.BytesMessage;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.MapMessage;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.ObjectMessage;
import javax.jms.Queue;
import javax.jms.QueueBrowser;
import javax.jms.Session;
import javax.jms.StreamMessage;

import org.apache.activemq.artemis.api.core.ICoreMessage;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.jms.client.ActiveMQMessage;

public final class Fidelity {

    /** Non-ASCII text with a surrogate pair (𝄞), so string encodings are really exercised. */
    static final String NON_ASCII = "héllo wörld ✓ 日本語 𝄞 \u0000 end";

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage("missing command");
        }
        Map<String, String> opts = parse(Arrays.copyOfRange(args, 1, args.length));
        String url = require(opts, "url");
        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(url, require(opts, "user"), require(opts, "password"));
        // Large bodies stream through the broker; keep the client's own threshold at its default unless asked.
        if (opts.containsKey("min-large-message-size")) {
            factory.setMinLargeMessageSize(Integer.parseInt(opts.get("min-large-message-size")));
        }
        try (Connection connection = factory.createConnection()) {
            switch (args[0]) {
                case "produce":
                    produce(connection, opts);
                    break;
                case "consume":
                    consume(connection, opts);
                    break;
                case "browse":
                    browse(connection, opts);
                    break;
                default:
                    usage("unknown command " + args[0]);
            }
        }
    }

    // ------------------------------------------------------------------------------------------ produce

    static void produce(Connection connection, Map<String, String> opts) throws Exception {
        int count = Integer.parseInt(require(opts, "count"));
        String prefix = opts.getOrDefault("prefix", "p-");
        String[] kinds = opts.getOrDefault("kinds", "text,bytes,map,stream,object,bare").split(",");
        int bodySize = Integer.parseInt(opts.getOrDefault("body-size", "0"));
        int batch = Integer.parseInt(opts.getOrDefault("batch", "100"));
        long scheduledDelay = Long.parseLong(opts.getOrDefault("scheduled-delay-ms", "0"));
        Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
        Queue queue = session.createQueue(require(opts, "queue"));
        MessageProducer producer = session.createProducer(queue);
        for (int i = 0; i < count; i++) {
            String kind = kinds[i % kinds.length];
            String id = prefix + i;
            Message m = body(session, kind, id, bodySize);
            headersAndProperties(session, m, id, i, opts);
            if (scheduledDelay > 0) {
                // The Core scheduled-delivery property: the broker holds the message back until then.
                ((ActiveMQMessage) m).getCoreMessage().putLongProperty(
                    org.apache.activemq.artemis.api.core.Message.HDR_SCHEDULED_DELIVERY_TIME,
                    System.currentTimeMillis() + scheduledDelay);
            }
            int mode = i % 2 == 0 ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT;
            if (opts.containsKey("durable-only")) {
                mode = DeliveryMode.PERSISTENT;
            }
            int priority = opts.containsKey("priority") ? Integer.parseInt(opts.get("priority")) : i % 10;
            // Every third message expires in a day: far enough never to expire in a test, set enough to compare.
            long ttl = i % 3 == 0 ? 86_400_000L : 0L;
            producer.send(m, mode, priority, ttl);
            if ((i + 1) % batch == 0) {
                session.commit();
            }
        }
        session.commit();
        System.err.println("produced " + count);
    }

    static Message body(Session session, String kind, String id, int bodySize) throws Exception {
        switch (kind) {
            case "text": {
                return session.createTextMessage(NON_ASCII + " " + id);
            }
            case "bytes": {
                BytesMessage m = session.createBytesMessage();
                if (bodySize > 0) {
                    // Streamed: the client sends it as a large message when over its threshold.
                    m.setObjectProperty("JMS_AMQ_InputStream", new PatternStream(id, bodySize));
                } else {
                    byte[] b = new byte[256];
                    for (int k = 0; k < b.length; k++) {
                        b[k] = (byte) (k ^ id.hashCode());
                    }
                    m.writeBytes(b);
                }
                return m;
            }
            case "map": {
                MapMessage m = session.createMapMessage();
                m.setString("id", id);
                m.setString("text", NON_ASCII);
                m.setBoolean("bool", true);
                m.setByte("byte", (byte) -7);
                m.setShort("short", (short) -30000);
                m.setInt("int", Integer.MIN_VALUE);
                m.setLong("long", Long.MAX_VALUE);
                m.setFloat("float", 1.5f);
                m.setDouble("double", -2.25e300);
                m.setChar("char", 'ж');
                m.setBytes("bytes", new byte[] {0, 1, -1, 127, -128});
                return m;
            }
            case "stream": {
                StreamMessage m = session.createStreamMessage();
                m.writeString(id);
                m.writeBoolean(false);
                m.writeByte((byte) 1);
                m.writeShort((short) 2);
                m.writeChar('é');
                m.writeInt(3);
                m.writeLong(4L);
                m.writeFloat(5.5f);
                m.writeDouble(6.25);
                m.writeBytes(new byte[] {9, 8, 7});
                m.writeString(NON_ASCII);
                return m;
            }
            case "object": {
                HashMap<String, Object> value = new HashMap<>();
                value.put("id", id);
                value.put("n", 42);
                return session.createObjectMessage(value);
            }
            case "bare":
                return session.createMessage();
            default:
                throw new IllegalArgumentException("unknown kind " + kind);
        }
    }

    static void headersAndProperties(Session session, Message m, String id, int i, Map<String, String> opts) throws Exception {
        m.setStringProperty("payload_id", id);
        m.setJMSCorrelationID("corr-" + id);
        m.setJMSType("type-" + (i % 5));
        m.setJMSReplyTo(session.createQueue(opts.getOrDefault("reply-to", "fidelity.reply")));
        m.setStringProperty("JMSXGroupID", "group-" + (i % 4));
        m.setBooleanProperty("p_bool", i % 2 == 0);
        m.setByteProperty("p_byte", (byte) (i % 128));
        m.setShortProperty("p_short", (short) -i);
        m.setIntProperty("p_int", i * 1000);
        m.setLongProperty("p_long", Long.MIN_VALUE + i);
        m.setFloatProperty("p_float", i + 0.25f);
        m.setDoubleProperty("p_double", i * 1e-300);
        m.setStringProperty("p_string", NON_ASCII);
        m.setStringProperty("p_empty", "");
        // Types JMS cannot express, set on the Core message underneath: char, bytes and null.
        ClientMessage core = ((ActiveMQMessage) m).getCoreMessage();
        core.putCharProperty(SimpleString.of("p_char"), 'ß');
        core.putBytesProperty(SimpleString.of("p_bytes"), new byte[] {(byte) i, 0, -1});
        core.putObjectProperty(SimpleString.of("p_null"), null);
    }

    /** A deterministic body of `size` bytes derived from the payload id, produced without holding it in memory. */
    static final class PatternStream extends java.io.InputStream {
        private final byte[] seed;
        private final long size;
        private long pos;

        PatternStream(String id, long size) {
            this.seed = id.getBytes(StandardCharsets.UTF_8);
            this.size = size;
        }

        @Override
        public int read() {
            if (pos >= size) {
                return -1;
            }
            int b = (seed[(int) (pos % seed.length)] + (int) (pos / 7)) & 0xff;
            pos++;
            return b;
        }

        @Override
        public int read(byte[] buf, int off, int len) {
            if (pos >= size) {
                return -1;
            }
            int n = (int) Math.min(len, size - pos);
            for (int k = 0; k < n; k++) {
                buf[off + k] = (byte) read();
            }
            return n;
        }
    }

    // --------------------------------------------------------------------------------- consume and browse

    static void consume(Connection connection, Map<String, String> opts) throws Exception {
        int max = Integer.parseInt(opts.getOrDefault("max", String.valueOf(Integer.MAX_VALUE)));
        long timeout = Long.parseLong(opts.getOrDefault("timeout-ms", "2000"));
        Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
        Queue queue = session.createQueue(require(opts, "queue"));
        MessageConsumer consumer = opts.containsKey("filter")
            ? session.createConsumer(queue, opts.get("filter")) : session.createConsumer(queue);
        connection.start();
        int n = 0;
        while (n < max) {
            Message m = consumer.receive(timeout);
            if (m == null) {
                break;
            }
            System.out.println(describe(m));
            n++;
            if (n % 100 == 0) {
                session.commit();
            }
        }
        session.commit();
        System.out.flush();
        System.err.println("consumed " + n);
    }

    static void browse(Connection connection, Map<String, String> opts) throws Exception {
        int max = Integer.parseInt(opts.getOrDefault("max", String.valueOf(Integer.MAX_VALUE)));
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = session.createQueue(require(opts, "queue"));
        QueueBrowser browser = opts.containsKey("filter")
            ? session.createBrowser(queue, opts.get("filter")) : session.createBrowser(queue);
        connection.start();
        Enumeration<?> e = browser.getEnumeration();
        int n = 0;
        while (n < max && e.hasMoreElements()) {
            System.out.println(describe((Message) e.nextElement()));
            n++;
        }
        System.out.flush();
        System.err.println("browsed " + n);
    }

    // ----------------------------------------------------------------------------------- canonical JSON

    static String describe(Message m) throws Exception {
        ICoreMessage core = ((ActiveMQMessage) m).getCoreMessage();
        TreeMap<String, Object> out = new TreeMap<>();
        out.put("message_id", core.getMessageID());
        out.put("address", core.getAddress());
        out.put("core_type", (int) core.getType());
        out.put("durable", core.isDurable());
        out.put("priority", (int) core.getPriority());
        out.put("expiration", core.getExpiration());
        out.put("timestamp", core.getTimestamp());
        out.put("user_id", core.getUserID() == null ? null : core.getUserID().toString());
        out.put("delivery_count", m.getIntProperty("JMSXDeliveryCount"));
        Object payload = core.getObjectProperty(SimpleString.of("payload_id"));
        out.put("payload_id", payload == null ? null : payload.toString());
        TreeMap<String, Object> props = new TreeMap<>();
        for (SimpleString name : core.getPropertyNames()) {
            props.put(name.toString(), typed(core.getObjectProperty(name)));
        }
        out.put("properties", props);
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        long[] size = {0};
        if (core.isLargeMessage() && core instanceof ClientMessage) {
            // Stream the body through the digest: a large message is never held in memory here.
            ((ClientMessage) core).saveToOutputStream(new OutputStream() {
                @Override
                public void write(int b) {
                    sha.update((byte) b);
                    size[0]++;
                }

                @Override
                public void write(byte[] b, int off, int len) {
                    sha.update(b, off, len);
                    size[0] += len;
                }
            });
            out.put("large", true);
        } else {
            var body = core.getReadOnlyBodyBuffer();
            byte[] bytes = new byte[body.readableBytes()];
            body.readBytes(bytes);
            sha.update(bytes);
            size[0] = bytes.length;
            out.put("large", false);
        }
        out.put("body_sha256", hex(sha.digest()));
        out.put("body_size", size[0]);
        return json(out);
    }

    /** A property value as {"type": ..., "value": ...}, so a relay that changes a type is caught. */
    static Map<String, Object> typed(Object v) {
        TreeMap<String, Object> t = new TreeMap<>();
        String type;
        Object value = v;
        if (v == null) {
            type = "null";
        } else if (v instanceof Boolean) {
            type = "boolean";
        } else if (v instanceof Byte) {
            type = "byte";
        } else if (v instanceof Short) {
            type = "short";
        } else if (v instanceof Integer) {
            type = "int";
        } else if (v instanceof Long) {
            type = "long";
        } else if (v instanceof Float) {
            type = "float";
            value = Float.toString((Float) v);
        } else if (v instanceof Double) {
            type = "double";
            value = Double.toString((Double) v);
        } else if (v instanceof Character) {
            type = "char";
            value = v.toString();
        } else if (v instanceof SimpleString) {
            type = "string";
            value = v.toString();
        } else if (v instanceof String) {
            type = "string";
        } else if (v instanceof byte[]) {
            type = "bytes";
            value = hex((byte[]) v);
        } else {
            type = v.getClass().getName();
            value = v.toString();
        }
        t.put("type", type);
        t.put("value", value);
        return t;
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder(b.length * 2);
        for (byte x : b) {
            s.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return s.toString();
    }

    static String json(Object v) {
        StringBuilder s = new StringBuilder();
        write(s, v);
        return s.toString();
    }

    @SuppressWarnings("unchecked")
    static void write(StringBuilder s, Object v) {
        if (v == null) {
            s.append("null");
        } else if (v instanceof Map) {
            s.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
                if (!first) {
                    s.append(',');
                }
                first = false;
                write(s, e.getKey());
                s.append(':');
                write(s, e.getValue());
            }
            s.append('}');
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            s.append(v);
        } else {
            String str = v.toString();
            s.append('"');
            for (int i = 0; i < str.length(); i++) {
                char c = str.charAt(i);
                switch (c) {
                    case '"': s.append("\\\""); break;
                    case '\\': s.append("\\\\"); break;
                    case '\n': s.append("\\n"); break;
                    case '\r': s.append("\\r"); break;
                    case '\t': s.append("\\t"); break;
                    default:
                        if (c < 0x20) {
                            s.append(String.format("\\u%04x", (int) c));
                        } else {
                            s.append(c);
                        }
                }
            }
            s.append('"');
        }
    }

    // ---------------------------------------------------------------------------------------- arguments

    static Map<String, String> parse(String[] args) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--")) {
                usage("unexpected argument " + args[i]);
            }
            String key = args[i].substring(2);
            if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                m.put(key, args[++i]);
            } else {
                m.put(key, "true");
            }
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
        System.err.println("Fidelity: " + why);
        System.err.println("usage: Fidelity produce|consume|browse --url U --user X --password P --queue Q [options]");
        System.exit(2);
    }
}
