import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

/**
 * Runs javac in-process (on an instrumented java.base and jdk.compiler when
 * patched in) and reports how many probe calls java.base recorded.
 */
public class CompileWithProbes {
    public static void main(String[] args) throws Exception {
        JavaCompiler c = ToolProvider.getSystemJavaCompiler();
        int rc = c.run(null, null, null, args);
        long entries = 0;
        long exits = 0;
        try {
            Class<?> p = Class.forName("sprig.test.BootProbe");
            for (long v : (long[]) p.getField("ENTRIES").get(null)) entries += v;
            for (long v : (long[]) p.getField("EXITS").get(null)) exits += v;
        } catch (ClassNotFoundException e) {
            // not instrumented
        }
        System.out.println("javac rc " + rc);
        System.out.println("probes " + (entries > 1_000_000 ? "many" : String.valueOf(entries)) + " "
            + (exits > 1_000_000 ? "many" : String.valueOf(exits)));
    }
}
