/** Test fixture for sprig's attach tests: prints "ready" once running, then sleeps until killed. */
public final class Sleeper {
    public static void main(String[] args) throws InterruptedException {
        System.out.println("ready");
        System.out.flush();
        while (true) {
            Thread.sleep(60_000L);
        }
    }
}
