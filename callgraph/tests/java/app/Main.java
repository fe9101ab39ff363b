package app;

/** Runs the root {@link App#run} once, after loading two classes the root never reaches. */
public class Main {
    public static void main(String[] args) throws Exception {
        Class.forName("app.Triangle");
        Class.forName("app.Never");
        int result = new App().run(args.length + 2);
        System.out.println("result " + result);
    }
}
