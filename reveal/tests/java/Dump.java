import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;

/** Writes the bytes of the named classes (binary names, one per line on stdin) to outdir/internal/Name.class. */
public class Dump {
    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String internal = line.trim().replace('.', '/');
            if (internal.isEmpty()) {
                continue;
            }
            try (InputStream s = ClassLoader.getSystemResourceAsStream(internal + ".class")) {
                if (s == null) {
                    continue;
                }
                Path file = out.resolve(internal + ".class");
                Files.createDirectories(file.getParent());
                Files.write(file, s.readAllBytes());
            }
        }
    }
}
