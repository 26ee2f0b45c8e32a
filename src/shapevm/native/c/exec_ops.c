/* The executor's own kernels: strided copy and fill of any dtype, iota, and the batched matrix
 * product over resolved tensors (dense layers and the other families have their own). */
#include "exec.h"
#include <string.h>

const int svx_itemsize[SVX_NDTYPES] = {4, 8, 4, 8, 1, 1, 1, 2, 2};

/* Iterate the outer dims of a shape (all but the last) in row-major order. */
static int next_index(int64_t *idx, const int64_t *shape, int outer) {
    for (int d = outer - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) return 1;
        idx[d] = 0;
    }
    return 0;
}

static int64_t numel(const svx_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

/* The copy's dims with those of size 1 dropped and neighbours that both operands step
 * through evenly merged: a stacked pair (`[s, 8]` into every other element of `[s, 8, 2]`)
 * is one run of 8 s elements, not 8 s runs of one (2.7 ns an element, then 0.5). */
static int copy_dims(const svx_tensor *src, const svx_tensor *dst, int64_t *shape, int64_t *ss,
                     int64_t *ds) {
    int n = 0;
    for (int d = 0; d < dst->ndim; d++) {
        int64_t m = dst->shape[d];
        if (m == 1) continue;
        if (n > 0 && ss[n - 1] == src->strides[d] * m && ds[n - 1] == dst->strides[d] * m) {
            shape[n - 1] *= m;
        } else {
            shape[n] = m;
            n++;
        }
        ss[n - 1] = src->strides[d];
        ds[n - 1] = dst->strides[d];
    }
    if (n == 0) { /* one element */
        shape[0] = 1;
        ss[0] = ds[0] = 0;
        n = 1;
    }
    return n;
}

/* Rows of n copies of one element each (a source of stride 0 along the last axis: np.repeat
 * along it, nearest-neighbour upsampling, a column broadcast over short rows).  Element by
 * element with the row loop's bookkeeping around every pair, [4, 4, 64, 32] repeated twice
 * along the last axis took 41 us (1.25 ns a pair); two rows of one value a step, 4.7 us. */
#define SV_REPEAT_ROWS(T)                                                                      \
    static void repeat_rows_##T(const T *s, int64_t srs, T *t, int64_t drs, int64_t rows,      \
                                int64_t n) {                                                   \
        if (n == 2 && drs == 2) {                                                              \
            for (int64_t r = 0; r < rows; r++) t[2 * r] = t[2 * r + 1] = s[r * srs];           \
        } else if (n == 4 && drs == 4) {                                                       \
            for (int64_t r = 0; r < rows; r++) {                                               \
                T v = s[r * srs];                                                              \
                t[4 * r] = t[4 * r + 1] = t[4 * r + 2] = t[4 * r + 3] = v;                     \
            }                                                                                  \
        } else {                                                                               \
            for (int64_t r = 0; r < rows; r++) {                                               \
                T v = s[r * srs], *row = t + r * drs;                                          \
                for (int64_t i = 0; i < n; i++) row[i] = v;                                    \
            }                                                                                  \
        }                                                                                      \
    }
SV_REPEAT_ROWS(uint8_t)
SV_REPEAT_ROWS(uint16_t)
SV_REPEAT_ROWS(uint32_t)
SV_REPEAT_ROWS(uint64_t)

/* A transpose: rows of dst (unit stride) read down columns of src (stride ss, the rows a
 * unit apart in src): blocks of TRANSPOSE_BLOCK x TRANSPOSE_BLOCK, so that the lines read
 * down a block's columns are still in the cache for the next row (row by row, each read of
 * a 512 x 512 float32 transpose's row fetched 512 lines: 301 us, 3.5 GB/s). */
#define TRANSPOSE_BLOCK 32
#define SV_TRANSPOSE(T)                                                                        \
    static void transpose_##T(const T *s, int64_t ss, T *t, int64_t drs, int64_t rows,         \
                              int64_t n) {                                                     \
        for (int64_t r0 = 0; r0 < rows; r0 += TRANSPOSE_BLOCK) {                               \
            int64_t r1 = r0 + TRANSPOSE_BLOCK < rows ? r0 + TRANSPOSE_BLOCK : rows;            \
            for (int64_t i0 = 0; i0 < n; i0 += TRANSPOSE_BLOCK) {                              \
                int64_t i1 = i0 + TRANSPOSE_BLOCK < n ? i0 + TRANSPOSE_BLOCK : n;              \
                for (int64_t r = r0; r < r1; r++) {                                            \
                    const T *sr = s + r;                                                       \
                    T *tr = t + r * drs;                                                       \
                    for (int64_t i = i0; i < i1; i++) tr[i] = sr[i * ss];                      \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }
SV_TRANSPOSE(uint16_t)
SV_TRANSPOSE(uint64_t)

/* 4-byte elements: 4 x 4 squares of a block through registers (four loads of 16 bytes
 * down the source's rows, eight shuffles, four stores), the block's edges element by
 * element.  512 x 512 float32: 122 us a call with the scalar blocks. */
typedef uint32_t sv_u4 __attribute__((vector_size(16)));
static inline sv_u4 load_u4(const uint32_t *p) {
    sv_u4 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static void transpose_uint32_t(const uint32_t *s, int64_t ss, uint32_t *t, int64_t drs,
                               int64_t rows, int64_t n) {
    for (int64_t r0 = 0; r0 < rows; r0 += TRANSPOSE_BLOCK) {
        int64_t r1 = r0 + TRANSPOSE_BLOCK < rows ? r0 + TRANSPOSE_BLOCK : rows;
        for (int64_t i0 = 0; i0 < n; i0 += TRANSPOSE_BLOCK) {
            int64_t i1 = i0 + TRANSPOSE_BLOCK < n ? i0 + TRANSPOSE_BLOCK : n;
            int64_t r = r0;
            for (; r + 4 <= r1; r += 4) {
                int64_t i = i0;
                for (; i + 4 <= i1; i += 4) {
                    sv_u4 a = load_u4(s + r + i * ss), b = load_u4(s + r + (i + 1) * ss);
                    sv_u4 c = load_u4(s + r + (i + 2) * ss), d = load_u4(s + r + (i + 3) * ss);
                    sv_u4 ab0 = __builtin_shufflevector(a, b, 0, 4, 1, 5);
                    sv_u4 ab1 = __builtin_shufflevector(a, b, 2, 6, 3, 7);
                    sv_u4 cd0 = __builtin_shufflevector(c, d, 0, 4, 1, 5);
                    sv_u4 cd1 = __builtin_shufflevector(c, d, 2, 6, 3, 7);
                    sv_u4 o0 = __builtin_shufflevector(ab0, cd0, 0, 1, 4, 5);
                    sv_u4 o1 = __builtin_shufflevector(ab0, cd0, 2, 3, 6, 7);
                    sv_u4 o2 = __builtin_shufflevector(ab1, cd1, 0, 1, 4, 5);
                    sv_u4 o3 = __builtin_shufflevector(ab1, cd1, 2, 3, 6, 7);
                    memcpy(t + r * drs + i, &o0, sizeof o0);
                    memcpy(t + (r + 1) * drs + i, &o1, sizeof o1);
                    memcpy(t + (r + 2) * drs + i, &o2, sizeof o2);
                    memcpy(t + (r + 3) * drs + i, &o3, sizeof o3);
                }
                for (int64_t q = r; q < r + 4; q++)
                    for (int64_t k = i; k < i1; k++) t[q * drs + k] = s[q + k * ss];
            }
            for (; r < r1; r++)
                for (int64_t k = i0; k < i1; k++) t[r * drs + k] = s[r + k * ss];
        }
    }
}

/* 2 to 4 rows of 4-byte elements, ss apart, interleaved into one (planes to pixels:
 * channels first to last, a pixel shuffle's columns): t[r * n + i] = s[i * ss + r], each
 * plane read in order and the loop written for the compiler to vectorize (the transpose's
 * edge loop, an element at a time, took 0.8 ns an element). */
static void interleave_u32(const uint32_t *restrict s, int64_t ss, uint32_t *restrict t,
                           int64_t rows, int64_t n) {
    const uint32_t *restrict a = s, *restrict b = s + ss;
    if (n == 2) {
        for (int64_t r = 0; r < rows; r++) {
            t[2 * r] = a[r];
            t[2 * r + 1] = b[r];
        }
        return;
    }
    const uint32_t *restrict c = s + 2 * ss;
    if (n == 3) {
        for (int64_t r = 0; r < rows; r++) {
            t[3 * r] = a[r];
            t[3 * r + 1] = b[r];
            t[3 * r + 2] = c[r];
        }
        return;
    }
    const uint32_t *restrict d = s + 3 * ss;
    for (int64_t r = 0; r < rows; r++) {
        t[4 * r] = a[r];
        t[4 * r + 1] = b[r];
        t[4 * r + 2] = c[r];
        t[4 * r + 3] = d[r];
    }
}

int svx_copy(const svx_tensor *src, const svx_tensor *dst) {
    if (src->ndim != dst->ndim || src->dtype != dst->dtype) return -1;
    for (int d = 0; d < src->ndim; d++)
        if (src->shape[d] != dst->shape[d]) return -1;
    if (numel(dst) == 0) return 0;
    size_t isz = (size_t)svx_itemsize[dst->dtype];
    int64_t shape[SVX_MAXDIM], sst[SVX_MAXDIM], dst_st[SVX_MAXDIM], idx[SVX_MAXDIM] = {0};
    int nd = copy_dims(src, dst, shape, sst, dst_st);
    int64_t n = shape[nd - 1], ss = sst[nd - 1], ds = dst_st[nd - 1];
    /* rows of the last dim, row after row along the one before it (a patch embedding's
     * transpose copies rows of 4 floats: offsets worked out over every outer dim and a
     * call to memmove per row took 1.7 ns an element) */
    int outer = nd >= 2 ? nd - 2 : 0;
    int64_t rows = nd >= 2 ? shape[nd - 2] : 1, srs = nd >= 2 ? sst[nd - 2] : 0,
            drs = nd >= 2 ? dst_st[nd - 2] : 0;
    size_t row_bytes = (size_t)n * isz;
    do {
        int64_t so = 0, doff = 0;
        for (int d = 0; d < outer; d++) {
            so += idx[d] * sst[d];
            doff += idx[d] * dst_st[d];
        }
        if (ds == 1 && srs == 1 && isz == 4 && n >= 2 && n <= 4 && drs == n && ss >= rows) {
            interleave_u32((const uint32_t *)(src->data + so * (int64_t)isz), ss,
                           (uint32_t *)(dst->data + doff * (int64_t)isz), rows, n);
            continue;
        }
        if (ds == 1 && srs == 1 && ss > 1 && rows >= 8 && n >= 8 && isz >= 2) {
            const char *s = src->data + so * (int64_t)isz;
            char *t = dst->data + doff * (int64_t)isz;
            switch (isz) {
            case 2: transpose_uint16_t((const uint16_t *)s, ss, (uint16_t *)t, drs, rows, n); break;
            case 4: transpose_uint32_t((const uint32_t *)s, ss, (uint32_t *)t, drs, rows, n); break;
            default: transpose_uint64_t((const uint64_t *)s, ss, (uint64_t *)t, drs, rows, n);
            }
            continue;
        }
        if (ss == 0 && ds == 1 && n > 1) { /* each row one element n times */
            char *s = src->data + so * (int64_t)isz, *t = dst->data + doff * (int64_t)isz;
            switch (isz) {
            case 1: repeat_rows_uint8_t((const uint8_t *)s, srs, (uint8_t *)t, drs, rows, n); break;
            case 2: repeat_rows_uint16_t((const uint16_t *)s, srs, (uint16_t *)t, drs, rows, n); break;
            case 4: repeat_rows_uint32_t((const uint32_t *)s, srs, (uint32_t *)t, drs, rows, n); break;
            default: repeat_rows_uint64_t((const uint64_t *)s, srs, (uint64_t *)t, drs, rows, n);
            }
            continue;
        }
        for (int64_t r = 0; r < rows; r++, so += srs, doff += drs) {
            char *s = src->data + so * (int64_t)isz, *t = dst->data + doff * (int64_t)isz;
            if (ss == 1 && ds == 1 && row_bytes <= 64 &&
                (t >= s + row_bytes || s >= t + row_bytes)) { /* short, apart: inline copy */
                for (size_t i = 0; i < row_bytes; i++) t[i] = s[i];
            } else if (ss == 1 && ds == 1) {
                memmove(t, s, row_bytes);
            } else if (isz == 4) {
                for (int64_t i = 0; i < n; i++)
                    ((int32_t *)t)[i * ds] = ((const int32_t *)s)[i * ss];
            } else if (isz == 8) {
                for (int64_t i = 0; i < n; i++)
                    ((int64_t *)t)[i * ds] = ((const int64_t *)s)[i * ss];
            } else if (isz == 2) {
                for (int64_t i = 0; i < n; i++)
                    ((int16_t *)t)[i * ds] = ((const int16_t *)s)[i * ss];
            } else {
                for (int64_t i = 0; i < n; i++) t[i * ds] = s[i * ss];
            }
        }
    } while (next_index(idx, shape, outer));
    return 0;
}

/* 0, 1, ..., n - 1 into a vector (np.arange): each value converted as NumPy converts an
 * integer (exact below 2^24 in f32). */
int svx_iota(const svx_tensor *dst) {
    if (dst->ndim != 1) return -1;
    int64_t n = dst->shape[0], s = dst->strides[0];
    switch (dst->dtype) {
    case SVX_F32:
        for (int64_t i = 0; i < n; i++) ((float *)dst->data)[i * s] = (float)i;
        return 0;
    case SVX_F64:
        for (int64_t i = 0; i < n; i++) ((double *)dst->data)[i * s] = (double)i;
        return 0;
    case SVX_I32:
        for (int64_t i = 0; i < n; i++) ((int32_t *)dst->data)[i * s] = (int32_t)i;
        return 0;
    case SVX_I64:
        for (int64_t i = 0; i < n; i++) ((int64_t *)dst->data)[i * s] = i;
        return 0;
    default: return -1;
    }
}

int svx_fill(const svx_tensor *dst, double value) {
    if (numel(dst) == 0) return 0;
    union {
        float f;
        double d;
        int32_t i32;
        int64_t i64;
        uint8_t u8;
        int8_t i8;
        int16_t i16;
        char bytes[8];
    } v;
    memset(&v, 0, sizeof v);
    switch (dst->dtype) {
    case SVX_F32: v.f = (float)value; break;
    case SVX_F64: v.d = value; break;
    case SVX_I32: v.i32 = (int32_t)value; break;
    case SVX_I64: v.i64 = (int64_t)value; break;
    case SVX_BOOL: v.u8 = value != 0.0; break;
    case SVX_U8: v.u8 = (uint8_t)value; break;
    case SVX_I8: v.i8 = (int8_t)value; break;
    case SVX_I16: v.i16 = (int16_t)value; break;
    default: return -1;
    }
    size_t isz = (size_t)svx_itemsize[dst->dtype];
    int nd = dst->ndim;
    if (nd == 0) {
        memcpy(dst->data, v.bytes, isz);
        return 0;
    }
    int64_t idx[SVX_MAXDIM] = {0};
    int64_t n = dst->shape[nd - 1], ds = dst->strides[nd - 1];
    do {
        int64_t off = 0;
        for (int d = 0; d < nd - 1; d++) off += idx[d] * dst->strides[d];
        char *t = dst->data + off * (int64_t)isz;
        /* typed stores (a memcpy of a variable size per element ran at ~5 ns each) */
        switch (isz) {
        case 8: {
            int64_t x;
            memcpy(&x, v.bytes, 8);
            for (int64_t i = 0; i < n; i++) ((int64_t *)t)[i * ds] = x;
            break;
        }
        case 4: {
            int32_t x;
            memcpy(&x, v.bytes, 4);
            for (int64_t i = 0; i < n; i++) ((int32_t *)t)[i * ds] = x;
            break;
        }
        case 2: {
            int16_t x;
            memcpy(&x, v.bytes, 2);
            for (int64_t i = 0; i < n; i++) ((int16_t *)t)[i * ds] = x;
            break;
        }
        default:
            for (int64_t i = 0; i < n; i++) t[i * ds] = v.bytes[0];
        }
    } while (next_index(idx, dst->shape, nd - 1));
    return 0;
}

typedef struct bmm_job {
    const svx_tensor *a, *b, *c;
    int nb; /* batch dims of c */
    float alpha;
    int threads;
} bmm_job;

static void bmm_one(void *vctx, int64_t t) {
    const bmm_job *j = vctx;
    const svx_tensor *a = j->a, *b = j->b, *c = j->c;
    int64_t offa = 0, offb = 0, offc = 0, rest = t;
    for (int d = j->nb - 1; d >= 0; d--) {
        int64_t i = rest % c->shape[d];
        rest /= c->shape[d];
        int da = d - (j->nb - (a->ndim - 2)), db = d - (j->nb - (b->ndim - 2));
        if (da >= 0 && a->shape[da] != 1) offa += i * a->strides[da];
        if (db >= 0 && b->shape[db] != 1) offb += i * b->strides[db];
        offc += i * c->strides[d];
    }
    int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1], n = b->shape[b->ndim - 1];
    sv_epilogue ep = {.alpha = j->alpha};
    sv_sgemm(m, n, k, (const float *)a->data + offa, a->strides[a->ndim - 2],
             a->strides[a->ndim - 1], (const float *)b->data + offb, b->strides[b->ndim - 2],
             b->strides[b->ndim - 1], (float *)c->data + offc, c->strides[c->ndim - 2],
             j->alpha != 1.0f ? &ep : NULL, j->threads);
}

int svx_matmul(const svx_tensor *a, const svx_tensor *b, const svx_tensor *c, float alpha,
               int threads) {
    if (a->ndim < 2 || b->ndim < 2 || c->ndim < 2 || c->strides[c->ndim - 1] != 1) return -1;
    int nb = c->ndim - 2;
    int64_t batches = 1;
    for (int d = 0; d < nb; d++) batches *= c->shape[d];
    int64_t m = c->shape[c->ndim - 2], n = c->shape[c->ndim - 1];
    if (batches == 0 || m == 0 || n == 0) return 0;
    if (a->shape[a->ndim - 1] == 0) {
        svx_fill(c, 0.0);
        return 0;
    }
    bmm_job j = {.a = a, .b = b, .c = c, .nb = nb, .alpha = alpha,
                 .threads = batches > 1 ? 1 : threads};
    if (batches == 1)
        bmm_one(&j, 0);
    else
        sv_parallel(batches, bmm_one, &j);
    return 0;
}
