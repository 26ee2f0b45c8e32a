/* What a call of the region executor (exec_internal.h) computes before its instructions
 * run: the dimension program over the bound heap, each view slot resolved from its base and
 * checked to stay inside it, and the fit of a dense layer's or a batched product's resolved
 * operands.  No Python: these run on the call's own heap and tensors.
 */
#include "exec_internal.h"
#include <stdio.h>

static int64_t floordiv64(int64_t x, int64_t y) {
    int64_t q = x / y;
    return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}

/* Run the dimension program: 0, -1 on a division by zero, -2 when a result does not fit
 * in int64 (hostile dimension values must not wrap into small sizes). */
int svx_run_dimprog(const Executor *e, int64_t *h) {
    for (int i = 0; i < e->nprog; i++) {
        const int64_t *p = e->prog[i];
        int64_t a = h[p[1]], b = (p[0] == SVX_D_ADDC || p[0] == SVX_D_MULC) ? p[2] : h[p[2]];
        int64_t r;
        switch (p[0]) {
        case SVX_D_ADD: case SVX_D_ADDC:
            if (__builtin_add_overflow(a, b, &r)) return -2;
            break;
        case SVX_D_SUB:
            if (__builtin_sub_overflow(a, b, &r)) return -2;
            break;
        case SVX_D_MUL: case SVX_D_MULC:
            if (__builtin_mul_overflow(a, b, &r)) return -2;
            break;
        case SVX_D_FLOORDIV: case SVX_D_MOD:
            if (b == 0) return -1;
            if (a == INT64_MIN && b == -1) return -2;
            if (p[0] == SVX_D_FLOORDIV) {
                r = floordiv64(a, b);
            } else { /* Python's sign: that of b */
                r = a % b;
                if (r != 0 && ((r < 0) != (b < 0))) r += b;
            }
            break;
        case SVX_D_MAX: r = a > b ? a : b; break;
        default: r = a < b ? a : b; break;
        }
        h[p[3]] = r;
    }
    return 0;
}

const char *const svx_dimprog_error[3] = {
    "", "division by zero in a dimension",
    "a dimension does not fit in int64 (a variable's value is far too large)"};

/* The strides of t, a reshape of base (the same number of elements, none zero) that
 * reads the same elements in the same order without a copy: NumPy's no-copy reshape.
 * Each run of t's axes must cover a run of base's axes (without axes of one element)
 * whose strides nest (each axis's stride the next one's times its extent); -1 when one
 * does not. t then reaches exactly base's elements. */
static int strided_reshape(const svx_tensor *base, svx_tensor *t) {
    int64_t od[SVX_MAXDIM], os[SVX_MAXDIM];
    int on = 0, nn = t->ndim;
    for (int d = 0; d < base->ndim; d++)
        if (base->shape[d] != 1) od[on] = base->shape[d], os[on++] = base->strides[d];
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < nn && oi < on) {
        int64_t np = t->shape[ni], op = od[oi];
        while (np != op) { /* products of nonzero extents of one count: they meet */
            if (np < op) {
                if (nj >= nn) return -1;
                np *= t->shape[nj++];
            } else {
                if (oj >= on) return -1;
                op *= od[oj++];
            }
        }
        for (int k = oi; k < oj - 1; k++)
            if (os[k] != od[k + 1] * os[k + 1]) return -1;
        t->strides[nj - 1] = os[oj - 1];
        for (int k = nj - 1; k > ni; k--) t->strides[k - 1] = t->strides[k] * t->shape[k];
        ni = nj++;
        oi = oj++;
    }
    int64_t last = ni >= 1 ? t->strides[ni - 1] : 1;
    for (int k = ni; k < nn; k++) t->strides[k] = last; /* trailing axes of one element */
    return 0;
}

/* Resolve a view slot from its (already resolved) base, checking that every element it
 * reaches lies in the base for these dimension values: 0, or -1 with msg filled in. */
int svx_resolve_view(const svx_slot *sl, const svx_tensor *base, const int64_t *h,
                     svx_tensor *t, char *msg, size_t size) {
    size_t isz = (size_t)svx_itemsize[sl->dtype];
    t->data = base->data;
    switch (sl->viewop) {
    case SVX_V_TRANSPOSE:
        for (int d = 0; d < sl->ndim; d++) {
            if (t->shape[d] != base->shape[sl->param[d]]) {
                snprintf(msg, size, "transpose: axis %d has %lld elements, its base axis %d "
                         "has %lld", d, (long long)t->shape[d], sl->param[d],
                         (long long)base->shape[sl->param[d]]);
                return -1;
            }
            t->strides[d] = base->strides[sl->param[d]];
        }
        break;
    case SVX_V_SLICE: {
        int64_t off = 0;
        for (int d = 0; d < sl->ndim; d++) {
            int64_t start = h[sl->param[d]], step = sl->param2[d], n = t->shape[d];
            /* the last element taken, start + (n - 1) * step, lies in [0, base) (a step
             * below 0 walks back from start: a flipped axis; the executor's construction
             * refused a step of 0 or of INT32_MIN) */
            int64_t room = step > 0 ? (base->shape[d] - 1 - start) / step : start / -step;
            if (n > 0 && (start < 0 || start >= base->shape[d] || (n - 1) > room)) {
                snprintf(msg, size, "slice: axis %d takes %lld elements from %lld by %lld of "
                         "a base of %lld", d, (long long)n, (long long)start, (long long)step,
                         (long long)base->shape[d]);
                return -1;
            }
            if (n > 0) off += start * base->strides[d];
            t->strides[d] = base->strides[d] * step;
        }
        t->data = base->data + off * (int64_t)isz;
        break;
    }
    case SVX_V_RESHAPE: {
        int64_t expect = 1, count = 1;
        int wrapped = 0, contiguous = 1; /* a product past int64 could wrap onto the count */
        for (int d = base->ndim - 1; d >= 0; d--) {
            if (base->shape[d] != 1 && base->strides[d] != expect) contiguous = 0;
            wrapped |= __builtin_mul_overflow(expect, base->shape[d], &expect);
        }
        for (int d = 0; d < sl->ndim; d++) /* dims checked >= 0 */
            wrapped |= __builtin_mul_overflow(count, t->shape[d], &count);
        if (wrapped) {
            snprintf(msg, size, "reshape: an element count past int64");
            return -1;
        }
        if (count != expect) {
            snprintf(msg, size, "reshape: %lld elements from a base of %lld", (long long)count,
                     (long long)expect);
            return -1;
        }
        if (contiguous || count == 0) {
            svx_contiguous_strides(t);
        } else if (strided_reshape(base, t) != 0) {
            snprintf(msg, size, "reshape of a base whose strides no view of that shape has");
            return -1;
        }
        break;
    }
    case SVX_V_SELECT: {
        int used = 0;
        for (int d = 0; d < sl->ndim; d++) {
            if (sl->param[d] < 0) {
                if (t->shape[d] != 1) goto select_bad;
                t->strides[d] = 0;
            } else {
                if (base->shape[sl->param[d]] != t->shape[d]) goto select_bad;
                t->strides[d] = base->strides[sl->param[d]];
                used |= 1 << sl->param[d];
            }
        }
        for (int d = 0; d < base->ndim; d++)
            if (!(used & (1 << d)) && base->shape[d] != 1) goto select_bad;
        break;
    select_bad:
        snprintf(msg, size, "select: axes that differ from their base's");
        return -1;
    }
    default: { /* broadcast: right-aligned */
        int lead = sl->ndim - base->ndim;
        for (int d = 0; d < sl->ndim; d++) {
            int bd = d - lead;
            if (bd >= 0 && base->shape[bd] != 1 && base->shape[bd] != t->shape[d]) {
                snprintf(msg, size, "broadcast: axis %d of %lld elements from a base axis of "
                         "%lld", d, (long long)t->shape[d], (long long)base->shape[bd]);
                return -1;
            }
            t->strides[d] = (bd < 0 || base->shape[bd] == 1) ? 0 : base->strides[bd];
        }
        break;
    }
    }
    return 0;
}

/* Whether the leading dims of t (all but the last) fold into rows of one stride. */
static int rows_fold(const svx_tensor *t) {
    for (int d = 0; d + 2 < t->ndim; d++)
        if (t->shape[d] > 1 && t->strides[d] != t->strides[d + 1] * t->shape[d + 1]) return 0;
    return 1;
}

/* Whether the memory a and b span (from their lowest to their highest element) meets. */
int svx_overlaps(const svx_tensor *a, const svx_tensor *b) {
    const svx_tensor *t[2] = {a, b};
    char *lo[2], *hi[2];
    for (int i = 0; i < 2; i++) {
        int64_t below = 0, above = 0, isz = svx_itemsize[t[i]->dtype];
        for (int d = 0; d < t[i]->ndim; d++) {
            if (t[i]->shape[d] == 0) return 0; /* empty: no memory */
            int64_t ext = (t[i]->shape[d] - 1) * t[i]->strides[d] * isz;
            if (ext < 0) below += ext;
            else above += ext;
        }
        lo[i] = t[i]->data + below;
        hi[i] = t[i]->data + above + isz;
    }
    return lo[0] < hi[1] && lo[1] < hi[0];
}

/* A result written in the memory of an operand the kernel reads other than element by
 * element (a dense layer's or a convolution's input, a product's factors): rows of it
 * would be read after the kernel wrote over them.  The residual may be the result's own
 * memory, exactly, as the kernels read each of its elements before writing that one. */
int svx_result_overlaps(const svx_tensor *y, const svx_tensor *x, const svx_tensor *r) {
    if (svx_overlaps(y, x)) return 1;
    if (!r || !svx_overlaps(y, r)) return 0;
    if (r->data != y->data || r->ndim != y->ndim) return 1;
    for (int d = 0; d < y->ndim; d++)
        if (r->shape[d] != y->shape[d] || (r->shape[d] > 1 && r->strides[d] != y->strides[d]))
            return 1;
    return 0;
}

/* A dense layer's operands against its packed weights: NULL if they fit, else why. */
const char *svx_dense_misfit(const svx_tensor *x, const svx_tensor *y, const svx_tensor *r,
                             const sv_packed_b *b) {
    static _Thread_local char msg[160];
    if (x->shape[x->ndim - 1] != b->k || y->shape[y->ndim - 1] != b->n) {
        snprintf(msg, sizeof msg, "dense: x [..., %lld] -> y [..., %lld] against weights packed "
                 "for %lld -> %lld", (long long)x->shape[x->ndim - 1],
                 (long long)y->shape[y->ndim - 1], (long long)b->k, (long long)b->n);
        return msg;
    }
    for (int d = 0; d < x->ndim - 1; d++)
        if (x->shape[d] != y->shape[d] || (r && r->shape[d] != y->shape[d]))
            return "dense: x, its result and residual differ in a leading dimension";
    if (r && r->shape[r->ndim - 1] != b->n) return "dense: a residual of another width";
    if (!rows_fold(x) || !rows_fold(y) || (r && !rows_fold(r)))
        return "dense: operands whose rows are not evenly spaced";
    /* the kernel reads and writes whole rows: unit inner stride (a residual broadcast
     * along its last axis, stride 0, would be read past its end) */
    if ((x->ndim && x->strides[x->ndim - 1] != 1 && b->k > 1) ||
        (y->ndim && y->strides[y->ndim - 1] != 1 && b->n > 1) ||
        (r && r->ndim && r->strides[r->ndim - 1] != 1 && b->n > 1))
        return "dense: operands without unit inner stride";
    if (svx_result_overlaps(y, x, r))
        return "dense: its result in the memory of its input (or of a residual it is not "
               "exactly)";
    return NULL;
}

/* A batched product's shapes: a [..., m, k] @ b [..., k, n] -> c [..., m, n], the batch
 * dims of a and b 1 or c's. */
const char *svx_matmul_misfit(const svx_tensor *a, const svx_tensor *b, const svx_tensor *c) {
    int64_t m = c->shape[c->ndim - 2], n = c->shape[c->ndim - 1];
    if (a->shape[a->ndim - 2] != m || b->shape[b->ndim - 1] != n ||
        a->shape[a->ndim - 1] != b->shape[b->ndim - 2])
        return "matmul: a [m, k] @ b [k, n] -> c [m, n] with other m, k or n";
    for (int d = 0; d < c->ndim - 2; d++) {
        int da = d - (c->ndim - a->ndim), db = d - (c->ndim - b->ndim);
        if ((da >= 0 && a->shape[da] != 1 && a->shape[da] != c->shape[d]) ||
            (db >= 0 && b->shape[db] != 1 && b->shape[db] != c->shape[d]))
            return "matmul: batch dimensions that do not broadcast to the result's";
    }
    if (svx_overlaps(c, a) || svx_overlaps(c, b)) return "matmul: its result in a factor's memory";
    return NULL;
}
