import org.apache.activemq.artemis.api.core.client.ActiveMQClient;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientRequestor;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;
import org.apache.activemq.artemis.api.core.management.ManagementHelper;

/**
 * scripts/bench calls: management calls sent as Core messages to the broker's management address over one session,
 * the way the official client's ClientRequestor does, so the benchmark can set what each costs the broker beside the
 * same call through Jolokia.
 *
 * Reads lines on stdin, each "read <queue> <attribute> <count>" or "move <queue> <staging> <filter> <per-call> <count>",
 * makes that many calls, and answers each line with "done <millis> <last result>" once they are all answered.
 * The connection and session are made once, before the first line, so a line's calls are only the calls.
 */
public class CoreManagementCalls {
   public static void main(String[] args) throws Exception {
      String url = args[0], user = args[1], password = args[2];
      try (ServerLocator locator = ActiveMQClient.createServerLocator(url);
           ClientSessionFactory factory = locator.createSessionFactory();
           ClientSession session = factory.createSession(user, password, false, true, true, false, 1)) {
         session.start();
         ClientRequestor requestor = new ClientRequestor(session, "activemq.management");
         System.out.println("ready");
         java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
         String line;
         while ((line = in.readLine()) != null) {
            String[] w = line.split("\t");
            int count = Integer.parseInt(w[w.length - 1]);
            Object last = null;
            long start = System.nanoTime();
            for (int i = 0; i < count; i++) {
               ClientMessage request = session.createMessage(false);
               if (w[0].equals("read")) {
                  ManagementHelper.putAttribute(request, "queue." + w[1], w[2]);
               } else {
                  int perCall = Integer.parseInt(w[4]);
                  ManagementHelper.putOperationInvocation(request, "queue." + w[1], "moveMessages", perCall, w[3],
                                                          w[2], false, perCall);
               }
               ClientMessage reply = requestor.request(request, 30_000);
               if (reply == null || !ManagementHelper.hasOperationSucceeded(reply)) {
                  throw new IllegalStateException("the broker refused " + line + ": "
                                                  + (reply == null ? "no answer" : ManagementHelper.getResult(reply)));
               }
               last = ManagementHelper.getResult(reply);
            }
            System.out.println("done " + (System.nanoTime() - start) / 1_000_000 + " " + last);
         }
         requestor.close();
      }
   }
}
