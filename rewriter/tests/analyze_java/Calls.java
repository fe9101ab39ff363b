import java.util.*;
import java.util.function.*;

interface Greeter {
    String greet(String who);
    default String hello() { return greet("world"); }
    static Greeter polite() { return w -> "dear " + w; }
}

abstract class Shape {
    abstract double area();
}

class DefaultUser implements Greeter {
    public String greet(String who) { return who; }
    String useDefault() { return hello(); }
}

public class Calls implements Greeter {
    private int x;
    public Calls() { super(); }
    public String greet(String who) { return "hi " + who + x; }
    static int twice(int a) { return a * 2; }
    private void priv() { x++; }
    public String hello() { return Greeter.super.hello(); }
    public void all(List<String> list) {
        int y = twice(3);
        String s = greet("a");
        list.size();
        priv();
        Runnable r = () -> System.out.println(x);
        Function<String, Integer> f = String::length;
        Supplier<ArrayList<String>> c = ArrayList::new;
        Greeter g = this;
        g.hello();
        new StringBuilder().append(y);
        Greeter.polite();
    }
    int leaf(int a) {
        switch (a) { case 1: return 5; case 7: return 9; case 1000: return 3; default: break; }
        switch (a) { case 0: return 1; case 1: return 2; case 2: return 4; case 3: return 8; default: return a + 1; }
    }
    long wideLocals(long a) {
        long l0 = a, l1 = a, l2 = a, l3 = a, l4 = a, l5 = a, l6 = a, l7 = a, l8 = a, l9 = a;
        long m0 = a, m1 = a, m2 = a, m3 = a, m4 = a, m5 = a, m6 = a, m7 = a, m8 = a, m9 = a;
        long n0 = a, n1 = a, n2 = a, n3 = a, n4 = a, n5 = a, n6 = a, n7 = a, n8 = a, n9 = a;
        long o0 = a, o1 = a, o2 = a, o3 = a, o4 = a, o5 = a, o6 = a, o7 = a, o8 = a, o9 = a;
        long p0 = a, p1 = a, p2 = a, p3 = a, p4 = a, p5 = a, p6 = a, p7 = a, p8 = a, p9 = a;
        long q0 = a, q1 = a, q2 = a, q3 = a, q4 = a, q5 = a, q6 = a, q7 = a, q8 = a, q9 = a;
        long r0 = a, r1 = a, r2 = a, r3 = a, r4 = a, r5 = a, r6 = a, r7 = a, r8 = a, r9 = a;
        int i = 0;
        i += 1000;
        return l0 + m0 + n0 + o0 + p0 + q0 + r0 + r9 + i + twice(i);
    }
    native void nat();
}
