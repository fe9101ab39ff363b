package java.lang;

/**
 * Probe methods for the verifier corpus' JDK classes, patched into java.base
 * (--patch-module) so instrumented code of every module can link against it
 * while it is installed.
 */
public final class SprigProbe {
    private SprigProbe() {}

    public static void enter(int id) {}

    public static void exit(int id) {}

    public static void alloc(Class<?> c, int site) {}

    public static void allocArray(Object a, int site) {}

    public static void allocArrayLength(int length, int site) {}
}
