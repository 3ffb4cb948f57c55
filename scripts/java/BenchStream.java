// The official JMS client's side of `scripts/bench large` and `scripts/bench unstamped` (issue 29): it produces and
// reads back what those benchmarks move, so neither side's census is judged by our own client.
//
//   java -cp <build>:<ARTEMIS_HOME>/lib/* BenchStream produce-file --url U --user X --password P --queue Q --file F
//        one persistent BytesMessage whose body is the file F, streamed from disk (JMS_AMQ_InputStream: the client
//        sends it as a large message in chunks; the body is never held whole in memory)
//   java ... BenchStream consume-file --url U --user X --password P --queue Q --file F [--timeout-ms MS]
//        receives one message and streams its body to the file F (JMS_AMQ_SaveStream); prints
//        `size <bytes> sha256 <hex>` of what was written, or `none` when nothing came within the timeout
//   java ... BenchStream produce-many --url U --user X --password P --queue Q --count N [--body-size BYTES]
//        [--commit-every N] [--no-timestamp]
//        N persistent 1 KiB BytesMessages in transactions of --commit-every (1,000); --no-timestamp sends them
//        without a timestamp (JMS setDisableMessageTimestamp: the Core timestamp is 0)
//
// A summary on stderr; exit 1 on a wrong command line.

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.security.DigestOutputStream;
import java.security.MessageDigest;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;

import javax.jms.BytesMessage;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Session;

import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

public final class BenchStream {

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage("missing command");
        }
        Map<String, String> o = new HashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            o.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("--no-timestamp")) {
                o.put("no-timestamp", "true");
            }
        }
        ActiveMQConnectionFactory factory =
                new ActiveMQConnectionFactory(require(o, "url"), require(o, "user"), require(o, "password"));
        try (Connection connection = factory.createConnection()) {
            switch (args[0]) {
                case "produce-file":
                    produceFile(connection, o);
                    break;
                case "consume-file":
                    connection.start();
                    consumeFile(connection, o);
                    break;
                case "produce-many":
                    produceMany(connection, o);
                    break;
                default:
                    usage("unknown command " + args[0]);
            }
        }
    }

    static void produceFile(Connection connection, Map<String, String> o) throws Exception {
        try (Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
             InputStream body = new BufferedInputStream(new FileInputStream(require(o, "file")), 1 << 20)) {
            MessageProducer producer = session.createProducer(session.createQueue(require(o, "queue")));
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            BytesMessage m = session.createBytesMessage();
            m.setObjectProperty("JMS_AMQ_InputStream", body);
            long t = System.nanoTime();
            producer.send(m);
            System.err.printf("produce-file: sent %s in %.1f s%n", o.get("file"), (System.nanoTime() - t) / 1e9);
        }
    }

    static void consumeFile(Connection connection, Map<String, String> o) throws Exception {
        long timeout = Long.parseLong(o.getOrDefault("timeout-ms", "60000"));
        try (Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE)) {
            MessageConsumer consumer = session.createConsumer(session.createQueue(require(o, "queue")));
            Message m = consumer.receive(timeout);
            if (m == null) {
                System.out.println("none");
                return;
            }
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            CountingStream counted;
            try (OutputStream file = new BufferedOutputStream(new FileOutputStream(require(o, "file")), 1 << 20)) {
                counted = new CountingStream(new DigestOutputStream(file, sha));
                // Blocks until the whole body has been written (JMS_AMQ_OutputStream would return at once).
                m.setObjectProperty("JMS_AMQ_SaveStream", counted);
            }
            System.out.println("size " + counted.count + " sha256 " + HexFormat.of().formatHex(sha.digest()));
        }
    }

    static void produceMany(Connection connection, Map<String, String> o) throws Exception {
        long count = Long.parseLong(require(o, "count"));
        int size = Integer.parseInt(o.getOrDefault("body-size", "1024"));
        int every = Integer.parseInt(o.getOrDefault("commit-every", "1000"));
        boolean noTimestamp = o.containsKey("no-timestamp");
        byte[] body = new byte[size];
        try (Session session = connection.createSession(true, Session.SESSION_TRANSACTED)) {
            MessageProducer producer = session.createProducer(session.createQueue(require(o, "queue")));
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            producer.setDisableMessageTimestamp(noTimestamp);
            producer.setDisableMessageID(false);
            long t = System.nanoTime();
            for (long i = 1; i <= count; i++) {
                BytesMessage m = session.createBytesMessage();
                m.writeBytes(body);
                producer.send(m);
                if (i % every == 0) {
                    session.commit();
                }
            }
            session.commit();
            System.err.printf("produce-many: %d messages of %d bytes%s in %.1f s%n", count, size,
                    noTimestamp ? " without a timestamp" : "", (System.nanoTime() - t) / 1e9);
        }
    }

    /** Counts what passes through, so the census reports the body's size as written. */
    static final class CountingStream extends java.io.FilterOutputStream {
        long count;

        CountingStream(OutputStream out) {
            super(out);
        }

        @Override
        public void write(int b) throws java.io.IOException {
            out.write(b);
            count++;
        }

        @Override
        public void write(byte[] b, int off, int len) throws java.io.IOException {
            out.write(b, off, len);
            count += len;
        }
    }

    static String require(Map<String, String> o, String key) {
        String v = o.get(key);
        if (v == null) {
            usage("missing --" + key);
        }
        return v;
    }

    static void usage(String why) {
        System.err.println("BenchStream: " + why + " (see the comment at the top of scripts/java/BenchStream.java)");
        System.exit(1);
    }
}
