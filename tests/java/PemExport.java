// The test bed's private key export: `keytool` makes the test bed's certificates and keys (scripts/testbed,
// ensure_pki) but cannot write a private key out, and the Rust client reads its client key as PEM. This writes the
// key of one PKCS12 entry as an unencrypted PKCS#8 PEM file, and its certificate chain (leaf first) as PEM, with
// the JDK alone: nothing else (openssl) has to be installed.
//
//   java -cp <build> PemExport <store.p12> <store password> <alias> <key.pem> <chain.pem>

import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.Key;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.util.Base64;

public final class PemExport {

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: PemExport <store.p12> <store password> <alias> <key.pem> <chain.pem>");
            System.exit(2);
        }
        char[] password = args[1].toCharArray();
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (FileInputStream in = new FileInputStream(args[0])) {
            store.load(in, password);
        }
        Key key = store.getKey(args[2], password);
        if (key == null) {
            System.err.println("no key entry " + args[2] + " in " + args[0]);
            System.exit(1);
        }
        Files.write(Paths.get(args[3]), pem("PRIVATE KEY", key.getEncoded()).getBytes(StandardCharsets.US_ASCII));
        StringBuilder chain = new StringBuilder();
        for (Certificate cert : store.getCertificateChain(args[2])) {
            chain.append(pem("CERTIFICATE", cert.getEncoded()));
        }
        Files.write(Paths.get(args[4]), chain.toString().getBytes(StandardCharsets.US_ASCII));
    }

    static String pem(String label, byte[] der) {
        String body = Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(der);
        return "-----BEGIN " + label + "-----\n" + body + "\n-----END " + label + "-----\n";
    }
}
