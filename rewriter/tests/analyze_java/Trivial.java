// Methods on both sides of the trivial-method rule (analyze.rs,
// trivial_methods). Names say what the test expects: t_ trivial, n_ not.
public class Trivial {
    private int x;
    private Object o;
    private static long counter;
    private final int[] table = new int[4];

    public Trivial() {}                                   // calls Object.<init>

    int t_getter() { return x; }                          // 5 bytes
    void t_setter(int v) { x = v; }                       // 6 bytes
    static long t_static() { return counter; }            // 4 bytes
    void t_empty() {}                                     // 1 byte
    static int t_constant() { return 42; }                // 3 bytes
    boolean t_forward() { return o != null; }             // forward branches, 12 bytes
    int t_array(int i) { return table[i]; }               // 7 bytes
    String t_string() { return "s"; }                     // ldc of a string
    Object t_cast(Object v) { return (String) v; }        // checkcast
    static int t_sixteen(int a, int b) {                  // 16 bytes exactly
        return a * b + a * a + b * b + a + 1;
    }

    static int n_seventeen(int a, int b) {                // 17 bytes
        return a * b + a * a + b * b + a + 7;
    }
    int n_calls() { return t_getter(); }                  // invokevirtual
    int n_loop(int n) { int s = 0; for (int i = 0; i < n; i++) s += i; return s; }
    Object n_new() { return new Object(); }               // allocation
    int[] n_newarray() { return new int[2]; }             // allocation
    void n_throw() { throw null; }                         // athrow
    synchronized int n_sync() { return x; }               // synchronized
    int n_monitor() { synchronized (this) { return x; } }
    int n_switch(int k) { switch (k) { case 0: return 1; case 1: return 7; default: return 0; } }
    Runnable n_lambda() { return () -> t_constant(); }  // invokedynamic; the body calls
    native int n_native();
}
