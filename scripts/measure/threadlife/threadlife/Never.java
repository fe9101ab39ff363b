package threadlife;

/** A root that is loaded and never called while a session runs. */
public final class Never {
    private Never() {}

    static volatile int sink;

    public static void never() {
        sink++;
    }
}
