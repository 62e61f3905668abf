/* A stand-in for libcuda.so.1 at the ctypes boundary, for the CUDA probe's and the memory
 * test's tests. FAKE_CUDA selects the behaviour: "ok", "init_fail", "ctx_fail:N" (card N's
 * context creation fails with CUDA_ERROR_DEVICES_UNAVAILABLE, 46), "hang:N" (card N never
 * returns), "bad_mem:N" (card N: bits 0, 8 and 16 of the word at byte 1024 of its first
 * allocation are stuck at 1), "oom_after:K" (allocations past the K-th fail with
 * CUDA_ERROR_OUT_OF_MEMORY, 2), "oom_over_mib:N" (an allocation that would take the card
 * past N MiB fails the same way: the card has less than it said free), "jit_fail" (the module is refused with
 * CUDA_ERROR_INVALID_PTX, 218, and a JIT log line), "no_plant" (cuMemsetD32 of a single
 * word is ignored: a self-test fault that never lands). FAKE_CUDA_FREE_MIB (default 320)
 * is the card's free memory. For the card diagnostics (hwcheck/carddiag): "bad_sm:N" (card
 * N's SM 1 returns a wrong FP32 FMA), "flip_link:N" (card N's host-to-device copies flip a
 * bit); pinned host memory is malloc, and the diag_* kernels of hwcheck/carddiag/compute.ptx
 * run here in C with the same results (four SMs: block b runs on SM b % 4).
 *
 * Device memory is host memory (malloc), and cuLaunchKernel runs memtest_fill and
 * memtest_verify here in C with the semantics of hwcheck/memtest.ptx (the same word
 * values, counters, records, zero bursts and block map), so the memory test's child,
 * its parsing and its self-test run for real up to the driver's edge. The PTX itself is
 * checked by ptxas in the suite and runs on a real card in bench/gpu_memtest_check.py. */
#include <stdint.h>
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
static uint32_t *block_mem[MAX_BLOCKS];
static int blocks = 0;
static unsigned long long next_ptr = BASE;

int cuInit(unsigned int flags) { (void)flags; return strcmp(mode(), "init_fail") == 0 ? 3 : 0; }
int cuDeviceGet(int *device, int ordinal) { *device = ordinal; return 0; }
int cuDeviceGetCount(int *count) {
    const char *cards = getenv("FAKE_CUDA_CARDS");
    *count = cards ? atoi(cards) : 4; return 0;
}
int cuDeviceGetName(char *name, int len, int device) {
    (void)device; strncpy(name, "Fake CMP 170HX", (size_t)len); return 0;
}
int cuDeviceGetAttribute(int *value, int attribute, int device) {
    (void)device; *value = attribute == 16 ? 4 : 0; return 0;
}
int cuCtxCreate_v2(void **ctx, unsigned int flags, int device) {
    (void)flags;
    if (card_in("hang:", device)) for (;;) pause();
    if (card_in("ctx_fail:", device)) return 46;
    current = device; *ctx = (void *)(long)(device + 1); return 0;
}
int cuCtxSynchronize(void) { return 0; }
int cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    const char *free_mib = getenv("FAKE_CUDA_FREE_MIB");
    *free_bytes = (size_t)(free_mib ? atoll(free_mib) : 320) << 20;
    *total_bytes = *free_bytes + (64ULL << 20);
    return 0;
}
int cuMemAlloc_v2(unsigned long long *ptr, size_t size) {
    const char *m = mode();
    if (strncmp(m, "oom_after:", 10) == 0 && blocks >= atoi(m + 10)) return 2;
    if (blocks >= MAX_BLOCKS) return 2;
    if (strncmp(m, "oom_over_mib:", 13) == 0) {
        size_t used = 0;
        for (int i = 0; i < blocks; i++) used += block_size[i];
        if (used + size > ((size_t)atoll(m + 13) << 20)) return 2;
    }
    uint32_t *mem = calloc(size / 4 + 1, 4);
    if (!mem) return 2;
    block_ptr[blocks] = next_ptr; block_size[blocks] = size; block_mem[blocks] = mem;
    *ptr = next_ptr; next_ptr += size + 4096; blocks++;
    return 0;
}
int cuMemFree_v2(unsigned long long ptr) { (void)ptr; return 0; }

/* The host memory behind device address ``ptr`` with ``bytes`` valid after it, or NULL. */
static uint32_t *at(unsigned long long ptr, size_t bytes, int *index) {
    for (int i = 0; i < blocks; i++) {
        if (ptr >= block_ptr[i] && ptr + bytes <= block_ptr[i] + block_size[i]) {
            if (index) *index = i;
            return block_mem[i] + (ptr - block_ptr[i]) / 4;
        }
    }
    return NULL;
}
/* bad_mem: the stuck bits reassert themselves after every write. */
static void stuck(void) {
    for (int i = 0; i < blocks; i++) {
        if (card_in("bad_mem:", current) && block_size[i] > 1028 && block_size[i] >= (1u << 20)) {
            block_mem[i][256] |= 0x00010101u;
            return;
        }
    }
}
int cuMemsetD32_v2(unsigned long long ptr, unsigned int value, size_t count) {
    uint32_t *words = at(ptr, count * 4, NULL);
    if (!words) return 1;
    if (count == 1 && strcmp(mode(), "no_plant") == 0) return 0;
    for (size_t w = 0; w < count; w++) words[w] = value;
    stuck();
    return 0;
}
int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes) {
    uint32_t *words = at(src, bytes, NULL);
    if (!words) return 1;
    memcpy(dst, words, bytes);
    return 0;
}
int cuMemHostAlloc(void **ptr, size_t bytes, unsigned int flags) {
    (void)flags; *ptr = malloc(bytes); return *ptr ? 0 : 2;
}
int cuMemFreeHost(void *ptr) { free(ptr); return 0; }
int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t bytes) {
    uint32_t *words = at(dst, bytes, NULL);
    if (!words) return 1;
    memcpy(words, src, bytes);
    if (card_in("flip_link:", current) && bytes >= 8) words[1] ^= 0x10u;
    return 0;
}
int cuMemcpyDtoD_v2(unsigned long long dst, unsigned long long src, size_t bytes) {
    uint32_t *to = at(dst, bytes, NULL), *from = at(src, bytes, NULL);
    if (!to || !from) return 1;
    memmove(to, from, bytes);
    stuck();
    return 0;
}

int cuModuleLoadDataEx(void **module, const char *image, unsigned int n, int *options, void **values) {
    if (strcmp(mode(), "jit_fail") == 0) {
        for (unsigned int i = 0; i < n; i++)
            if (options[i] == 5) strcpy((char *)values[i], "ptxas fatal   : Unresolved extern function 'x'\n");
        return 218;
    }
    int memtest = strstr(image, ".entry memtest_fill") && strstr(image, ".entry memtest_verify");
    int diag = strstr(image, ".entry diag_mad_u32") && strstr(image, ".entry diag_mma_s8");
    if (!memtest && !diag) return 218;
    *module = (void *)1; return 0;
}
int cuModuleUnload(void *module) { (void)module; return 0; }
int cuModuleGetFunction(void **function, void *module, const char *name) {
    (void)module;
    if (strcmp(name, "memtest_fill") == 0) { *function = (void *)1; return 0; }
    if (strcmp(name, "memtest_verify") == 0) { *function = (void *)2; return 0; }
    if (strcmp(name, "diag_mad_u32") == 0) { *function = (void *)3; return 0; }
    if (strcmp(name, "diag_fma_f32") == 0) { *function = (void *)4; return 0; }
    if (strcmp(name, "diag_mma_f16") == 0) { *function = (void *)5; return 0; }
    if (strcmp(name, "diag_mma_s8") == 0) { *function = (void *)6; return 0; }
    return 500;
}

/* hwcheck/memtest.ptx's memtest_word, in C. */
static uint32_t word_value(uint32_t mode_, uint32_t arg, uint64_t word) {
    uint32_t lo = (uint32_t)word, hi = (uint32_t)(word >> 32), x;
    switch (mode_) {
    case 0: return arg;
    case 1: return arg ^ (uint32_t)(-(int32_t)(lo & 1));
    case 2: return 1u << ((lo + arg) & 31);
    case 3: return lo + hi * 0x9E3779B1u;
    default:
        x = lo ^ (arg + hi * 0x9E3779B9u);
        x ^= x >> 16; x *= 0x7FEB352Du; x ^= x >> 15; x *= 0x846CA68Bu; x ^= x >> 16;
        return x;
    }
}

/* hwcheck/carddiag/compute.ptx's kernels, in C: out[thread * words], smids[block]. */
static int diag_kernel(long kind, unsigned int gx, unsigned int bx, void **params) {
    uint64_t out = *(uint64_t *)params[0], smids = *(uint64_t *)params[1];
    uint32_t iters = *(uint32_t *)params[2], seed = *(uint32_t *)params[3];
    int per = kind >= 5 ? 4 : 1;
    uint32_t *words = at(out, (size_t)gx * bx * per * 4, NULL);
    uint32_t *sms = at(smids, (size_t)gx * 4, NULL);
    if (!words || !sms) return 700;
    for (unsigned int b = 0; b < gx; b++) {
        sms[b] = b % 4;
        for (unsigned int t = 0; t < bx; t++) {
            uint32_t thread = b * bx + t, value = 0;
            if (kind == 3) {
                value = seed ^ thread;
                for (uint32_t i = 0; i < iters; i++) value = value * 1664525u + 1013904223u;
            } else if (kind == 4) {
                float x = (float)(thread & 255), a = (float)((thread & 15) + 1);
                for (uint32_t i = 0; i < iters; i++) x = a * 3.0f + x;
                memcpy(&value, &x, 4);
                if (card_in("bad_sm:", current) && b % 4 == 1 && t % 3 == 0) value ^= 0x400u;
            } else if (kind == 5) {
                float d = -54.0f * (float)iters;
                memcpy(&value, &d, 4);
            } else {
                value = (uint32_t)(-672 * (int32_t)iters);
            }
            for (int k = 0; k < per; k++) words[(size_t)thread * per + k] = value;
        }
    }
    return 0;
}

int cuLaunchKernel(void *f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                   unsigned int by, unsigned int bz, unsigned int shared, void *stream,
                   void **params, void **extra) {
    (void)gx; (void)gy; (void)gz; (void)by; (void)bz; (void)shared; (void)stream; (void)extra;
    if (bx != 256) return 1;
    if ((long)f >= 3) return diag_kernel((long)f, gx, bx, params);
    uint64_t ptr = *(uint64_t *)params[0], nvec = *(uint64_t *)params[1];
    uint64_t word0 = *(uint64_t *)params[2];
    uint32_t mode_ = *(uint32_t *)params[3], arg = *(uint32_t *)params[4];
    uint32_t xor_ = *(uint32_t *)params[5];
    if (nvec % 32) return 1; /* the kernels need whole warps */
    uint32_t *mem = at(ptr, nvec * 16, NULL);
    if (!mem) return 700; /* CUDA_ERROR_ILLEGAL_ADDRESS */
    if (f == (void *)1) {
        for (uint64_t w = 0; w < nvec * 4; w++) mem[w] = word_value(mode_, arg, word0 + w) ^ xor_;
        stuck();
        return 0;
    }
    uint32_t flags = *(uint32_t *)params[6];
    uint64_t *results = (uint64_t *)at(*(uint64_t *)params[7], 32, NULL);
    uint32_t shift = *(uint32_t *)params[9], max_records = *(uint32_t *)params[10];
    if (!results) return 700;
    uint64_t words = nvec * 4;
    for (uint64_t b = 0; b < words / 32; b++) {
        uint64_t burst = (flags & 1) ? words / 32 - 1 - b : b;
        int bad_here = 0, all_zero = 1;
        for (int k = 0; k < 32; k++) {
            uint64_t w = burst * 32 + ((flags & 1) ? (uint64_t)(31 - k) : (uint64_t)k);
            uint32_t expected = word_value(mode_, arg, word0 + w) ^ xor_, got = mem[w];
            if (got) all_zero = 0;
            if (got != expected) {
                uint32_t *map = at(*(uint64_t *)params[8] + ((word0 + w) >> shift) * 4, 4, NULL);
                if (!map) return 700;
                bad_here = 1;
                results[0] += 1;
                results[1] += (uint64_t)__builtin_popcount(got ^ expected);
                *map += 1;
                uint64_t slot = results[3]++;
                if (slot < max_records) {
                    results[4 + 2 * slot] = word0 + w;
                    results[5 + 2 * slot] = expected | ((uint64_t)got << 32);
                }
            }
            if (flags & 2) mem[w] = ~expected;
        }
        if (bad_here && all_zero) results[2] += 1;
    }
    if (flags & 2) stuck();
    return 0;
}

int cuCtxDestroy_v2(void *ctx) { (void)ctx; current = -1; return 0; }
int cuGetErrorName(int code, const char **name) {
    switch (code) {
    case 2: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 3: *name = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 46: *name = "CUDA_ERROR_DEVICES_UNAVAILABLE"; return 0;
    case 218: *name = "CUDA_ERROR_INVALID_PTX"; return 0;
    case 700: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; return 0;
    default: return 1;
    }
}
