//! The sprig JVMTI agent.
