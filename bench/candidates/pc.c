/* The JNI natives of ProbeCandidates.java: store a 16-byte event into a
 * thread-local buffer and publish its count, without and with rdtsc. */
#include <jni.h>
#include <stdint.h>
#include <x86intrin.h>
static __thread uint64_t buf[2 * 65536];
static __thread uint32_t pos;
static inline void put(uint64_t ts, uint32_t id, uint32_t kind) {
    uint32_t p = pos & 65535;
    buf[2 * p] = ts; buf[2 * p + 1] = ((uint64_t)kind << 32) | id;
    __atomic_store_n(&pos, pos + 1, __ATOMIC_RELEASE);
}
JNIEXPORT void JNICALL Java_ProbeCandidates_nEnter(JNIEnv *e, jclass c, jint id) { put(0, id, 1); }
JNIEXPORT void JNICALL Java_ProbeCandidates_nExit(JNIEnv *e, jclass c, jint id) { put(0, id, 2); }
JNIEXPORT void JNICALL Java_ProbeCandidates_nEnterTsc(JNIEnv *e, jclass c, jint id) { put(__rdtsc(), id, 1); }
JNIEXPORT void JNICALL Java_ProbeCandidates_nExitTsc(JNIEnv *e, jclass c, jint id) { put(__rdtsc(), id, 2); }
