// The broker's own reading of selectors, as the judge of ours: the artemis-selector jar of the broker's distribution
// parses each selector the way a queue's filter is parsed, and prints what it read.
//
//   java -cp <build>:<ARTEMIS_HOME>/lib/* SelectorOracle < selectors
//
// Input: one selector a line, base64 of its UTF-8 (selectors hold line breaks). Output, a line each, in order:
// `OK <the parsed expression's toString>` or `ERR <why>`.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

import org.apache.activemq.artemis.selector.impl.SelectorParser;

public class SelectorOracle {
   public static void main(String[] args) throws Exception {
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      PrintStream out = new PrintStream(System.out, true, "UTF-8");
      String line;
      while ((line = in.readLine()) != null) {
         String selector = new String(Base64.getDecoder().decode(line.trim()), StandardCharsets.UTF_8);
         String answer;
         try {
            answer = "OK " + SelectorParser.parse(selector);
         } catch (Throwable t) {
            Throwable why = t.getCause() != null ? t.getCause() : t;
            answer = "ERR " + why.getClass().getSimpleName() + ": " + why.getMessage();
         }
         out.println(answer.replace("\r", "\\r").replace("\n", "\\n"));
      }
   }
}
