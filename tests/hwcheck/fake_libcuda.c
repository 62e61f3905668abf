/* A stand-in for libcuda.so.1 at the ctypes boundary, for the CUDA probe's tests.
 * FAKE_CUDA selects the behaviour: "ok", "init_fail", "ctx_fail:N" (card N's context
 * creation fails with CUDA_ERROR_DEVICES_UNAVAILABLE, 46), "hang:N" (card N never returns). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *mode(void) { const char *m = getenv("FAKE_CUDA"); return m ? m : "ok"; }
static int card_in(const char *prefix, int card) {
    size_t n = strlen(prefix);
    return strncmp(mode(), prefix, n) == 0 && atoi(mode() + n) == card;
}
static int current = -1;

int cuInit(unsigned int flags) { (void)flags; return strcmp(mode(), "init_fail") == 0 ? 3 : 0; }
int cuDeviceGet(int *device, int ordinal) { *device = ordinal; return 0; }
int cuCtxCreate_v2(void **ctx, unsigned int flags, int device) {
    (void)flags;
    if (card_in("hang:", device)) for (;;) pause();
    if (card_in("ctx_fail:", device)) return 46;
    current = device; *ctx = (void *)(long)(device + 1); return 0;
}
int cuMemAlloc_v2(unsigned long long *ptr, size_t size) { (void)size; *ptr = 4096; return 0; }
int cuMemFree_v2(unsigned long long ptr) { (void)ptr; return 0; }
int cuCtxDestroy_v2(void *ctx) { (void)ctx; current = -1; return 0; }
int cuGetErrorName(int code, const char **name) {
    switch (code) {
    case 3: *name = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 46: *name = "CUDA_ERROR_DEVICES_UNAVAILABLE"; return 0;
    default: return 1;
    }
}
