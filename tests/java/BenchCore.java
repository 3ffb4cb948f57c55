// The Java side of `scripts/bench core`: the official Core client (org.apache.activemq.artemis.api.core.client,
// the jars of the broker's own distribution) doing exactly what the Rust side does, driven by the Rust benchmark
// (crates/artemis-core/benches/core.rs) over stdin/stdout so that one warm JVM serves every run:
//
//   java -cp <build>:<ARTEMIS_HOME>/lib/* BenchCore --url tcp://HOST:PORT --user X --password P
//   stdin:  produce <queue> <count> <batch> <bytes>   transacted sends of durable BYTES messages, commit per batch
//           consume <queue> <count> <batch>           receive, individual ack, commit per batch
//           quit
//   stdout: ok <elapsed nanoseconds>                  one line per command; errors end the program (exit 1)
//
// The client keeps its defaults (as an application would run it): transacted sessions (no answer per send, one
// per commit), a 1 MiB consumer window, a 64 KiB producer window. The clock runs from the first send or receive
// to the answer of the last commit.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.client.ActiveMQClient;
import org.apache.activemq.artemis.api.core.client.ClientConsumer;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientProducer;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;

public final class BenchCore {

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        String user = opts.get("user");
        String password = opts.get("password");
        try (ServerLocator locator = ActiveMQClient.createServerLocator(opts.get("url"));
             ClientSessionFactory sf = locator.createSessionFactory()) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                String[] cmd = line.trim().split("\\s+");
                long nanos;
                switch (cmd[0]) {
                    case "produce":
                        nanos = produce(sf, user, password, cmd[1], Integer.parseInt(cmd[2]), Integer.parseInt(cmd[3]),
                                        Integer.parseInt(cmd[4]));
                        break;
                    case "consume":
                        nanos = consume(sf, user, password, cmd[1], Integer.parseInt(cmd[2]), Integer.parseInt(cmd[3]));
                        break;
                    case "quit":
                        return;
                    default:
                        throw new IllegalArgumentException("unknown command: " + line);
                }
                System.out.println("ok " + nanos);
                System.out.flush();
            }
        }
    }

    static ClientSession transacted(ClientSessionFactory sf, String user, String password) throws Exception {
        // xa = false, autoCommitSends = false, autoCommitAcks = false, preAcknowledge = false.
        return sf.createSession(user, password, false, false, false, false, ActiveMQClient.DEFAULT_ACK_BATCH_SIZE);
    }

    static long produce(ClientSessionFactory sf, String user, String password, String queue, int count, int batch,
                        int size) throws Exception {
        byte[] payload = new byte[size];
        for (int i = 0; i < size; i++) {
            payload[i] = (byte) i;
        }
        try (ClientSession session = transacted(sf, user, password);
             ClientProducer producer = session.createProducer(queue)) {
            long start = System.nanoTime();
            for (int i = 1; i <= count; i++) {
                ClientMessage m = session.createMessage(Message.BYTES_TYPE, true);
                m.getBodyBuffer().writeBytes(payload);
                producer.send(m);
                if (i % batch == 0 || i == count) {
                    session.commit();
                }
            }
            return System.nanoTime() - start;
        }
    }

    static long consume(ClientSessionFactory sf, String user, String password, String queue, int count, int batch)
        throws Exception {
        try (ClientSession session = transacted(sf, user, password);
             ClientConsumer consumer = session.createConsumer(queue)) {
            session.start();
            long start = System.nanoTime();
            for (int i = 1; i <= count; i++) {
                ClientMessage m = consumer.receive(30_000);
                if (m == null) {
                    throw new IllegalStateException("message " + i + " of " + count + " did not arrive in 30 s");
                }
                m.individualAcknowledge();
                if (i % batch == 0 || i == count) {
                    session.commit();
                }
            }
            return System.nanoTime() - start;
        }
    }
}
