package app;

/**
 * Runs the root {@link App#run} once, after loading two classes the root never reaches, with a
 * comparator created outside the root.
 */
public class Main {
    public static void main(String[] args) throws Exception {
        Class.forName("app.Triangle");
        Class.forName("app.Never");
        int result = new App().run(args.length + 2, new ByName());
        System.out.println("result " + result);
    }
}
