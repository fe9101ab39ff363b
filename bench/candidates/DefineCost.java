import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;

/*
 * What a root that defines a class on every call is charged under sprig,
 * against its bare time (scripts/measure/define-cost.sh drives it and sprig). Each
 * root() call defines DefineCost$Unit anew in a fresh class loader (as a
 * scripting engine compiling a script per unit does), makes one through
 * reflection and calls it. Each "time" command runs root() `calls` times
 * and prints the mean ns per call (wall clock).
 */
public final class DefineCost {
    public interface Op {
        int apply(int x);
    }

    public static final class Unit implements Op {
        @Override
        public int apply(int x) {
            return x * 31 + 7;
        }
    }

    static final byte[] UNIT = bytes("DefineCost$Unit");
    static long sink;

    static byte[] bytes(String name) {
        try (InputStream in = DefineCost.class.getResourceAsStream(name + ".class")) {
            return in.readAllBytes();
        } catch (IOException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Defines DefineCost$Unit itself; everything else comes from the parent. */
    static final class UnitLoader extends ClassLoader {
        UnitLoader() {
            super(DefineCost.class.getClassLoader());
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (!name.equals("DefineCost$Unit")) {
                return super.loadClass(name, resolve);
            }
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                return c != null ? c : defineClass(name, UNIT, 0, UNIT.length);
            }
        }
    }

    /** The root: a new class, one instance, one call. */
    public static int root(int x) throws Exception {
        Class<?> c = new UnitLoader().loadClass("DefineCost$Unit");
        Op op = (Op) c.getDeclaredConstructor().newInstance();
        return op.apply(x);
    }

    public static void main(String[] args) throws Exception {
        System.out.println("ready " + ProcessHandle.current().pid());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("time")) {
                int calls = Integer.parseInt(w[1]);
                long t0 = System.nanoTime();
                for (int i = 0; i < calls; i++) {
                    sink += root(i);
                }
                long t1 = System.nanoTime();
                System.out.printf("root %.0f ns a call%n", (t1 - t0) / (double) calls);
            } else if (w[0].equals("exit")) {
                return;
            }
        }
    }
}
