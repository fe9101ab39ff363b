// Compiled with --release 8: private calls are invokespecial, lambdas still use LambdaMetafactory.
public class Old {
    private int secret() { return 42; }
    int reveal() { return secret(); }
    Runnable task() { return this::reveal; }
}
