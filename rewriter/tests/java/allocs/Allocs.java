import java.util.function.Supplier;

/** Known allocations for the allocation probes' test. */
public class Allocs {
    static class Point {
        final int x;
        Point(int x) {
            this.x = x;
        }
    }

    static class Labelled extends Point {
        final String label;
        Labelled(int x) {
            // an allocation in the arguments of super(...), before this is initialised
            super(new Point(x).x);
            this.label = new String("p" + x);
        }
    }

    static class Bad {
        Bad() {
            throw new IllegalStateException("bad");
        }
    }

    /** Copies itself with Object.clone(); a subclass inherits copy(). */
    static class Copyable implements Cloneable {
        int a = 1;
        Copyable copy() {
            try {
                return (Copyable) super.clone();
            } catch (CloneNotSupportedException e) {
                throw new AssertionError(e);
            }
        }
    }

    static class Wider extends Copyable {
        long b = 2;
        long c = 3;
    }

    /** Object.clone() of a class that is not Cloneable throws: no copy. */
    static class NotCloneable {
        Object copy() throws CloneNotSupportedException {
            return super.clone();
        }
    }

    static class NoInit {
        static final int V = Integer.parseInt("x");
    }

    static int loop(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            // the `new` is the loop's branch target
            s += new Point(i).x;
        }
        return s;
    }

    static Object arrays(boolean b) {
        int[] a = new int[7];
        String[] s = new String[3];
        long[][] m = new long[2][5];
        int[][][] partial = new int[4][2][];
        Object o = b ? new byte[11] : new char[13];
        // An array's clone() allocates: a primitive and a reference array,
        // and a two-dimension array's shallow copy (its outer array only).
        double[] d = new double[5].clone();
        Object[] r = new Object[6].clone();
        long[][] mc = m.clone();
        // A generic array's clone() names Object[]; the copy is a String[].
        String[] sc = copyOf(s);
        return a.length + s.length + m.length + partial.length + o.hashCode() * 0
                + d.length + r.length + mc.length + sc.length;
    }

    static <T> T[] copyOf(T[] a) {
        return a.clone();
    }

    public static void main(String[] args) {
        System.out.println("loop " + loop(3));
        System.out.println("arrays " + arrays(true) + " " + arrays(false));
        System.out.println("labelled " + new Labelled(5).label);
        try {
            new Bad();
        } catch (IllegalStateException e) {
            System.out.println("bad " + e.getMessage());
        }
        try {
            Object x = new NoInit();
            System.out.println("noinit " + x);
        } catch (ExceptionInInitializerError e) {
            System.out.println("noinit failed");
        }
        try {
            int n = args.length - 1;
            System.out.println("negative " + new int[n].length);
        } catch (NegativeArraySizeException e) {
            System.out.println("negative failed");
        }
        Copyable c1 = new Copyable().copy();
        Copyable c2 = new Wider().copy();
        Copyable c3 = c2.copy();
        System.out.println("clones " + c1.a + " " + c2.getClass().getSimpleName() + " "
                + ((Wider) c3).c);
        try {
            new NotCloneable().copy();
        } catch (CloneNotSupportedException e) {
            System.out.println("not cloneable");
        }
        Supplier<Point> f = () -> new Point(9);
        System.out.println("lambda " + f.get().x);
    }
}
