/*
 * A JVMTI agent with HotSpot's heap sampler on and nothing else, for
 * measuring what the sampler itself costs (scripts/measure/h2-sampler.py):
 * -agentpath:heapsampler.so=INTERVAL takes can_generate_sampled_object_alloc_events,
 * sets the sampling interval (default 524288 bytes, sprig's default) and
 * enables SampledObjectAlloc with a callback that only counts; prints the
 * count at VM death. Not part of sprig.
 */
#include <jvmti.h>
#include <stdio.h>
#include <stdlib.h>

static volatile long samples;

static void JNICALL on_sample(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread,
                              jobject object, jclass klass, jlong size) {
    __atomic_add_fetch(&samples, 1, __ATOMIC_RELAXED);
}

static void JNICALL on_death(jvmtiEnv *jvmti, JNIEnv *jni) {
    fprintf(stderr, "heapsampler: %ld samples\n", samples);
}

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved) {
    jvmtiEnv *jvmti;
    if ((*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_11) != JNI_OK) {
        fprintf(stderr, "heapsampler: no JVMTI 11\n");
        return 1;
    }
    jvmtiCapabilities caps = {0};
    caps.can_generate_sampled_object_alloc_events = 1;
    if ((*jvmti)->AddCapabilities(jvmti, &caps) != JVMTI_ERROR_NONE) {
        fprintf(stderr, "heapsampler: capability not available\n");
        return 1;
    }
    jvmtiEventCallbacks cb = {0};
    cb.SampledObjectAlloc = on_sample;
    cb.VMDeath = on_death;
    (*jvmti)->SetEventCallbacks(jvmti, &cb, sizeof cb);
    jint interval = options && *options ? atoi(options) : 524288;
    if ((*jvmti)->SetHeapSamplingInterval(jvmti, interval) != JVMTI_ERROR_NONE) {
        fprintf(stderr, "heapsampler: bad interval %d\n", interval);
        return 1;
    }
    (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
    (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_VM_DEATH, NULL);
    return 0;
}
