// A latency probe for `scripts/bench paged`: one durable message every --every-ms to --queue (official Core
// client, a non-transacted session, so each send waits for the broker's answer), for --secs seconds. Prints one
// line per send: `<epoch ms> <send latency microseconds>`; the bench splits them into before/during the run.
//
//   java -cp <build>:<ARTEMIS_HOME>/lib/* ProbeProducer --url tcp://HOST:PORT --user X --password P \
//        --queue Q --every-ms 50 --secs 60

import java.util.HashMap;
import java.util.Map;

import org.apache.activemq.artemis.api.core.client.ActiveMQClient;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientProducer;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;

public final class ProbeProducer {
    public static void main(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            o.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        long every = Long.parseLong(o.getOrDefault("every-ms", "50"));
        long until = System.currentTimeMillis() + 1000L * Long.parseLong(o.getOrDefault("secs", "60"));
        try (ServerLocator locator = ActiveMQClient.createServerLocator(o.get("url"));
             ClientSessionFactory sf = locator.createSessionFactory();
             ClientSession session = sf.createSession(o.get("user"), o.get("password"), false, true, true, false, 0)) {
            ClientProducer producer = session.createProducer(o.get("queue"));
            byte[] body = new byte[1024];
            while (System.currentTimeMillis() < until) {
                ClientMessage m = session.createMessage(true);
                m.getBodyBuffer().writeBytes(body);
                m.putStringProperty("probe", "latency");
                long t = System.nanoTime();
                producer.send(m);
                long micros = (System.nanoTime() - t) / 1000;
                System.out.println(System.currentTimeMillis() + " " + micros);
                System.out.flush();
                Thread.sleep(every);
            }
        }
    }
}
