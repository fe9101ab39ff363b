package sprig.rt;

/**
 * The one sprig session of this JVM, whichever copy of the agent runs it
 * (two sprig builds, or root's and the JVM owner's, load two copies that
 * share nothing else). Defined once per JVM in the bootstrap loader by the
 * first agent that attaches, before any of them binds the probe class's
 * natives; agents read and write {@link #owner} through JNI while they
 * hold this class's monitor. No code of its own.
 */
final class Session {
    /**
     * 0 while no session runs; otherwise the sprig that runs it: its
     * process id in the low 32 bits, its user id in the high 32 bits.
     */
    static long owner;

    private Session() {}
}
