package app;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;

/** The profiling root is {@code run}; every other method here is reached from it or never called. */
public class App {
    private final List<String> seen = new ArrayList<>();

    public int run(int n, Comparator<String> outside) throws Exception {
        int total = Util.twice(n);
        total += fact(5);
        Shape[] shapes = {new Circle(2), new Square(3)};
        for (Shape s : shapes) {
            total += s.describe();
        }
        Greeter[] greeters = {new English(), new French()};
        for (Greeter g : greeters) {
            seen.add(g.loud("bob"));
        }
        List<String> words = new ArrayList<>(List.of("pear", "fig", "apple"));
        words.sort(Comparator.comparing(App::keyOf));
        Collections.sort(words, new ByLength());
        words.sort(outside);
        total += words.stream().map(w -> w.length()).reduce(0, Integer::sum);
        Runnable tick = () -> seen.add("tick");
        tick.run();
        seen.add("first " + shapes[0]);
        Method m = Reflected.class.getMethod("hello", String.class);
        seen.add((String) m.invoke(null, "x"));
        if (n < 0) {
            total += rare();
        }
        if (n > 1) {
            total += later(n);
        }
        return total + seen.size();
    }

    private int later(int n) {
        Shape h = Late.make(n);
        return h.describe();
    }

    private int rare() {
        Never.touch();
        return new Triangle().describe();
    }

    static int fact(int k) {
        return k <= 1 ? 1 : k * fact(k - 1);
    }

    static String keyOf(String s) {
        return s.substring(1);
    }
}

abstract class Shape {
    abstract int area();

    int describe() {
        return area() + 1;
    }
}

class Circle extends Shape {
    private final int r;

    Circle(int r) {
        this.r = r;
    }

    int area() {
        return 3 * r * r;
    }

    @Override
    public String toString() {
        return "circle " + r;
    }
}

class Square extends Shape {
    private final int a;

    Square(int a) {
        this.a = a;
    }

    int area() {
        return a * a;
    }
}

/** Loaded by Main, never instantiated. */
class Triangle extends Shape {
    int area() {
        return 1;
    }
}

/** Loaded only when the root is half done. */
class Hexagon extends Shape {
    private final int s;

    Hexagon(int s) {
        this.s = s;
    }

    int area() {
        return 6 * s;
    }
}

class Late {
    static Shape make(int n) {
        return new Hexagon(n);
    }
}

interface Greeter {
    String greet(String who);

    default String loud(String who) {
        return greet(who).toUpperCase();
    }
}

class English implements Greeter {
    public String greet(String who) {
        return "hello " + who;
    }
}

class French implements Greeter {
    public String greet(String who) {
        return "salut " + who;
    }

    @Override
    public String loud(String who) {
        return "!" + greet(who);
    }
}

/** Handed to the JDK as an object; javac adds a bridge compare(Object, Object). */
class ByLength implements Comparator<String> {
    public int compare(String a, String b) {
        return Integer.compare(a.length(), b.length());
    }
}

/** Created by Main, outside the root, and handed to the JDK from inside it. */
class ByName implements Comparator<String> {
    public int compare(String a, String b) {
        return a.compareTo(b);
    }
}

class Reflected {
    public static String hello(String s) {
        return "refl " + s;
    }
}

/** Loaded by Main, reached only from a branch the root never takes. */
class Never {
    static void touch() {
        Util.twice(1);
    }
}

class Util {
    static int twice(int x) {
        return 2 * x;
    }
}
