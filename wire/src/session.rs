//! Private session directory, listener and channel. CONTRACT (pending in issue 3).
