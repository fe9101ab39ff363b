import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.stream.Stream;

/**
 * Defines every class found under a directory with its own loader and links
 * it (getDeclaredMethods links, so under -Xverify:all the verifier runs),
 * without running static initializers. Prints "OK name" or
 * "FAIL name Throwable" per class, sorted by name.
 */
public class VerifyLoader extends ClassLoader {
    private final Path root;

    VerifyLoader(Path root) {
        super(ClassLoader.getPlatformClassLoader());
        this.root = root;
    }

    /** Child-first for classes under the root (java.* cannot be defined here). */
    @Override
    protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
        synchronized (getClassLoadingLock(name)) {
            Class<?> c = findLoadedClass(name);
            if (c == null && !name.startsWith("java.") && Files.exists(root.resolve(name.replace('.', '/') + ".class"))) {
                c = findClass(name);
            }
            if (c == null) {
                return super.loadClass(name, resolve);
            }
            return c;
        }
    }

    @Override
    protected Class<?> findClass(String name) throws ClassNotFoundException {
        Path p = root.resolve(name.replace('.', '/') + ".class");
        try {
            byte[] b = Files.readAllBytes(p);
            return defineClass(name, b, 0, b.length);
        } catch (IOException e) {
            throw new ClassNotFoundException(name);
        }
    }

    public static void main(String[] args) throws Exception {
        Path root = Paths.get(args[0]);
        List<String> names = new ArrayList<>();
        try (Stream<Path> s = Files.walk(root)) {
            s.filter(p -> p.toString().endsWith(".class")).forEach(p -> {
                String rel = root.relativize(p).toString();
                String n = rel.substring(0, rel.length() - 6).replace('/', '.');
                if (!n.startsWith("META-INF") && !n.startsWith("java.") && !n.endsWith("module-info")
                        && !n.endsWith("package-info")) {
                    names.add(n);
                }
            });
        }
        Collections.sort(names);
        VerifyLoader loader = new VerifyLoader(root);
        StringBuilder out = new StringBuilder();
        for (String n : names) {
            try {
                Class<?> c = Class.forName(n, false, loader);
                c.getDeclaredMethods();
                out.append("OK ").append(n).append('\n');
            } catch (Throwable t) {
                String m = String.valueOf(t).replace('\n', ' ');
                out.append("FAIL ").append(n).append(' ').append(m).append('\n');
            }
        }
        System.out.print(out);
    }
}
