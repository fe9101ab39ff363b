import java.util.ArrayList;
import java.util.List;
import java.util.function.IntUnaryOperator;

/**
 * Virtual and interface calls of every argument shape, for the receiver
 * checks sprig can put before them: each result depends on every argument,
 * so a check that moved an argument would change the output.
 */
public class Guards {
    interface Shape {
        long area(int scale);
    }

    static class Square implements Shape {
        final int side;

        Square(int side) {
            this.side = side;
        }

        public long area(int scale) {
            return (long) side * side * scale;
        }
    }

    static class Circle implements Shape {
        final int r;

        Circle(int r) {
            this.r = r;
        }

        public long area(int scale) {
            return 3L * r * r * scale;
        }
    }

    static class Acc {
        long sum;

        long none() {
            return sum;
        }

        void addLong(long x) {
            sum = sum * 31 + x;
        }

        void addDouble(double d) {
            sum = sum * 31 + (long) (d * 10);
        }

        String two(int a, String b) {
            sum = sum * 31 + a + b.length();
            return b + a;
        }

        long mixed(double d, Object o, long l, int i, float f, boolean z, char c, byte b, short s) {
            sum = sum * 31 + (long) d + o.hashCode() % 7 + l + i + (long) f + (z ? 1 : 0) + c + b + s;
            return sum;
        }

        long wides(long a, double b, long c) {
            return a * 100 + (long) b * 10 + c;
        }

        int fail(int x) {
            if (x > 2) {
                throw new IllegalArgumentException("x=" + x);
            }
            return x;
        }
    }

    static class Base {
        final long v;

        Base(long v) {
            this.v = v;
        }
    }

    /** A virtual call in the arguments of super(...), before this is initialized. */
    static class Derived extends Base {
        Derived(Shape s, Acc a) {
            super(s.area(2) + a.wides(1L, 2.0, 3L));
        }
    }

    static long shapes(List<Shape> list) {
        long total = 0;
        for (int i = 0; i < list.size(); i++) {
            Shape s = list.get(i);
            if ((i & 1) == 0) {
                total += s.area(i + 1);
            } else {
                total -= s.area(2 * i);
            }
        }
        return total;
    }

    public static void main(String[] args) {
        Acc a = new Acc();
        List<Shape> list = new ArrayList<>();
        list.add(new Circle(2));
        list.add(new Square(3));
        list.add(new Circle(5));
        System.out.println("shapes " + shapes(list));
        a.addLong(1234567890123L);
        a.addDouble(2.5);
        System.out.println("two " + a.two(7, "seven"));
        System.out.println("mixed " + a.mixed(1.5, "obj", 99L, -4, 2.5f, true, 'x', (byte) 3, (short) -9));
        System.out.println("wides " + a.wides(5L, 6.0, 7L));
        System.out.println("none " + a.none());
        IntUnaryOperator twice = x -> 2 * x;
        System.out.println("lambda " + twice.applyAsInt(21));
        int[] arr = {1, 2, 3};
        System.out.println("clone " + arr.clone().length);
        System.out.println("derived " + new Derived(new Square(4), a).v);
        int caught = 0;
        for (int i = 0; i < 5; i++) {
            try {
                caught += a.fail(i);
            } catch (IllegalArgumentException e) {
                caught += 100;
                System.out.println("caught " + e.getMessage());
            }
        }
        System.out.println("caught total " + caught);
        Acc missing = args.length > 100 ? a : null;
        try {
            missing.addLong(1L);
        } catch (NullPointerException e) {
            System.out.println("npe " + e.getMessage());
        }
        System.out.println("many " + ManyLocals.run(a));
    }
}
