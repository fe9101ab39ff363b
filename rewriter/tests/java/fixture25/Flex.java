/**
 * Flexible constructor bodies (JDK 25): statements, including a field
 * write, before super(...). Instrumented constructors record entry after
 * super() returns, so a throw before it records nothing and every entry
 * still gets its exit.
 */
public class Flex {
    static class Base {
        final int v;

        Base(int v) {
            this.v = v;
            if (v == 6) throw new IllegalStateException("base six");
        }
    }

    static class Early extends Base {
        final int w;

        Early(int x) {
            if (x < 0) throw new IllegalArgumentException("negative");
            int y = x * 2;
            w = y + 1;
            super(y);
            if (x == 7) throw new IllegalStateException("seven");
        }
    }

    static void attempt(int x) {
        try {
            Early e = new Early(x);
            System.out.println("ok " + e.v + " " + e.w);
        } catch (RuntimeException e) {
            System.out.println("caught " + e.getMessage());
        }
    }

    public static void main(String[] args) {
        attempt(1);
        attempt(-1);
        attempt(7);
        attempt(3);
    }
}
