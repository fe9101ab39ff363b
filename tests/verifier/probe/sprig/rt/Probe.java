package sprig.rt;

/** Probe methods the verifier corpus instruments application classes with. */
public final class Probe {
    private Probe() {}

    public static void enter(int id) {}

    public static void exit(int id) {}

    public static void alloc(Class<?> c, int site) {}

    public static void allocArray(Object a, int site) {}

    public static void allocArrayLength(int length, int site) {}
}
