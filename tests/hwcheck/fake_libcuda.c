/* A stand-in for libcuda.so.1 at the ctypes boundary, for the CUDA probe's and the memory
 * test's tests. FAKE_CUDA selects the behaviour: "ok", "init_fail", "ctx_fail:N" (card N's
 * context creation fails with CUDA_ERROR_DEVICES_UNAVAILABLE, 46), "hang:N" (card N never
 * returns), "bad_mem:N" (card N's memory reads back 3 flipped bits in the word at byte 1024
 * of its first block, at every read), "oom_after:K" (allocations past the K-th fail with
 * CUDA_ERROR_OUT_OF_MEMORY, 2). Device memory is not stored: each allocation remembers
 * the 32-bit pattern last written to it and reads back as that pattern. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *mode(void) { const char *m = getenv("FAKE_CUDA"); return m ? m : "ok"; }
static int card_in(const char *prefix, int card) {
    size_t n = strlen(prefix);
    return strncmp(mode(), prefix, n) == 0 && atoi(mode() + n) == card;
}
static int current = -1;

#define MAX_BLOCKS 4096
#define BASE 0x100000000ULL
static unsigned long long block_ptr[MAX_BLOCKS];
static size_t block_size[MAX_BLOCKS];
static unsigned int block_value[MAX_BLOCKS];
static int blocks = 0;
static unsigned long long next_ptr = BASE;

int cuInit(unsigned int flags) { (void)flags; return strcmp(mode(), "init_fail") == 0 ? 3 : 0; }
int cuDeviceGet(int *device, int ordinal) { *device = ordinal; return 0; }
int cuCtxCreate_v2(void **ctx, unsigned int flags, int device) {
    (void)flags;
    if (card_in("hang:", device)) for (;;) pause();
    if (card_in("ctx_fail:", device)) return 46;
    current = device; *ctx = (void *)(long)(device + 1); return 0;
}
int cuCtxSynchronize(void) { return 0; }
int cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    *total_bytes = 65536ULL << 20; *free_bytes = 65000ULL << 20; return 0;
}
int cuMemAlloc_v2(unsigned long long *ptr, size_t size) {
    const char *m = mode();
    if (strncmp(m, "oom_after:", 10) == 0 && blocks >= atoi(m + 10)) return 2;
    if (blocks >= MAX_BLOCKS) return 2;
    block_ptr[blocks] = next_ptr; block_size[blocks] = size; block_value[blocks] = 0;
    *ptr = next_ptr; next_ptr += size + 4096; blocks++;
    return 0;
}
int cuMemFree_v2(unsigned long long ptr) { (void)ptr; return 0; }
static int find(unsigned long long ptr) {
    for (int i = 0; i < blocks; i++) if (block_ptr[i] == ptr) return i;
    return -1;
}
int cuMemsetD32_v2(unsigned long long ptr, unsigned int value, size_t count) {
    int i = find(ptr);
    if (i < 0 || count * 4 > block_size[i]) return 1;
    block_value[i] = value; return 0;
}
int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes) {
    int i = find(src);
    if (i < 0 || bytes > block_size[i]) return 1;
    unsigned int *words = dst;
    for (size_t w = 0; w < bytes / 4; w++) words[w] = block_value[i];
    if (card_in("bad_mem:", current) && i == 0 && bytes > 1028) words[256] ^= 0x00010101u;
    return 0;
}
int cuCtxDestroy_v2(void *ctx) { (void)ctx; current = -1; return 0; }
int cuGetErrorName(int code, const char **name) {
    switch (code) {
    case 2: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 3: *name = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 46: *name = "CUDA_ERROR_DEVICES_UNAVAILABLE"; return 0;
    default: return 1;
    }
}
