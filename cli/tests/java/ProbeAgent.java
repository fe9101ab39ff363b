/**
 * A stand-in Java agent for sprig's attach tests: loaded through the JDK's own
 * libinstrument, it proves a load request went through end to end by printing
 * its arguments on the target's stdout.
 */
public final class ProbeAgent {
    public static void agentmain(String args) {
        System.out.println("agentmain:" + args);
        System.out.flush();
    }
}
