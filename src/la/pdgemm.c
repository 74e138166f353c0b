/*
 * SRUMMA on ScaLAPACK's layout (paper 002): sub(C) = alpha op(A) op(B) +
 * beta sub(C), owner computes.
 *
 * Each process forms its own part of sub(C): the rows of sub(C) it owns
 * (local rows [row0, row0 + mloc) of its C array: a process's indices of a
 * range are consecutive local indices) times the columns it owns. For that
 * it needs op(A) restricted to those rows and op(B) restricted to those
 * columns, for all of k. The k range is cut into panels of whole blocks
 * (at least ONESIDED_LA_PANEL columns), and each panel is one dgemm:
 * mloc x nloc x width, large enough to run at the BLAS's full rate.
 *
 * A panel of op(A) is assembled from pieces: the kernel's rows split where
 * either C's or A's blocking changes owner, and k where A's or B's does;
 * each piece is one MPI_Rget of a strided block from its owner (consecutive
 * pieces with one owner and consecutive local indices are merged, so that
 * matrices sharing a blocking move in one get per owner and panel). A panel
 * that lies wholly in this process's own array is read in place. Every
 * blocking, offset and grid therefore takes this path; aligned ones move in
 * fewer, larger gets.
 *
 * Windows: MPI_Win_create over the caller's A and B for the call (onesided
 * shares their pages with the node's other processes, so that a get from a
 * node-mate is a copy). The epoch is one lock_all; MPI_Win_free at the end
 * is collective, so no process returns (and lets its caller change A or B)
 * while another may still read them.
 *
 * Order (paper 002): panels read in place first, then the others from a
 * different starting panel on every process, so that the processes do not
 * all read one owner at once; the next panel's gets are in flight while the
 * current panel's dgemm runs (double buffering).
 */
#include "os_la.h"
#include "util/os_util.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

/* Indices [off, off + len) of the kernel's m (or n, or k) range, whose
 * source lies on grid coordinate `owner` at local indices [local, local +
 * len). For the m and n ranges, off is relative to this process's part of
 * sub(C) (its panel row or column); for k, to the start of k. */
typedef struct {
    int off, len, owner, local;
} run_t;

static void run_append(run_t **v, int *n, int *cap, run_t x)
{
    run_t *last = *n ? &(*v)[*n - 1] : NULL;
    if (last && last->owner == x.owner && last->off + last->len == x.off &&
        last->local + last->len == x.local) {
        last->len += x.len;
        return;
    }
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *v = realloc(*v, sizeof **v * (size_t)*cap);
    }
    (*v)[(*n)++] = x;
}

/* This process's part of C's range [cg0, cg0 + len) (C coordinate `me`),
 * as runs of the source axis `s` whose range starts at sg0. */
static int runs_of_mine(const os_la_dist_t *c, int cg0, int me, const os_la_dist_t *s, int sg0,
                        int len, run_t **out)
{
    int n = 0, cap = 0;
    const int first = os_la_count(c, cg0, me);
    *out = NULL;
    for (int r = 0; r < len;) {
        const int gc = cg0 + r;
        int cend = r + c->b - gc % c->b;
        cend = cend < len ? cend : len;
        if (os_la_owner(c, gc) != me) {
            r = cend;
            continue;
        }
        while (r < cend) {
            const int gs = sg0 + r;
            int end = r + s->b - gs % s->b;
            end = end < cend ? end : cend;
            run_append(out, &n, &cap,
                       (run_t){ os_la_local(c, cg0 + r) - first, end - r, os_la_owner(s, gs),
                                os_la_local(s, gs) });
            r = end;
        }
    }
    return n;
}

/* k cut where either operand's blocking starts a block. */
typedef struct {
    int k0, len;
} kseg_t;

static int ksegs_of(const os_la_dist_t *a, int ag0, const os_la_dist_t *b, int bg0, int k,
                    kseg_t **out)
{
    int n = 0;
    *out = malloc(sizeof **out * (size_t)(k / a->b + k / b->b + 3)); /* cuts of both */
    for (int r = 0; r < k;) {
        int ea = r + a->b - (ag0 + r) % a->b, eb = r + b->b - (bg0 + r) % b->b;
        int end = ea < eb ? ea : eb;
        end = end < k ? end : k;
        (*out)[n++] = (kseg_t){ r, end - r };
        r = end;
    }
    return n;
}

/* One operand (op(A) or op(B)) as the kernel reads it. */
typedef struct {
    const double *base;     /* this process's local array */
    int lld;                /* its leading dimension */
    const int *lld_of;      /* every grid process's, by grid rank */
    MPI_Win win;
    bool k_is_row;          /* k runs along the matrix's rows (op = T for A, N for B) */
    os_la_dist_t kdist;     /* the matrix's distribution along k */
    int kg0;                /* global index of k = 0 along it */
    run_t *runs;            /* this process's part of C's rows (A) or columns (B) */
    int nruns, extent;      /* ... and its length (mloc or nloc) */
    int npcol, me;          /* grid width, for grid ranks; this process's grid rank */
    double *buf[2];         /* panel buffers: extent x width (or width x extent) */
} operand_t;

/* Where a panel of one operand is read from: a buffer the gets fill, or
 * the local array in place. */
typedef struct {
    const double *p;
    int ld;
} view_t;

/* Requests of one buffer slot (or, where the RMA's requests cannot be
 * trusted, a flush owed before the slot is read). */
typedef struct {
    MPI_Request *r;
    int n, cap;
    bool flush;
} reqs_t;

static MPI_Request *req_slot(reqs_t *q)
{
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 64;
        q->r = realloc(q->r, sizeof *q->r * (size_t)q->cap);
    }
    return &q->r[q->n++];
}

/* The pieces of one operand's panel [k0, k0 + width), from its k segments
 * (merged where one owner holds consecutive local indices). */
static int kpieces(const operand_t *x, const kseg_t *seg, int nseg, int k0, run_t *out)
{
    int n = 0, cap = nseg;
    run_t *v = out;
    for (int i = 0; i < nseg; i++) {
        const int g = x->kg0 + seg[i].k0;
        run_append(&v, &n, &cap,
                   (run_t){ seg[i].k0 - k0, seg[i].len, os_la_owner(&x->kdist, g),
                            os_la_local(&x->kdist, g) });
    }
    return n;
}

/* The panel in place, when one piece and one run cover it from this
 * process (grid coordinates myrow, mycol). An operand's k axis is its
 * columns (op N for A, T for B) or its rows; its other axis is C's rows
 * (A) or columns (B). */
static bool in_place(const operand_t *x, const run_t *piece, int npieces, int myrow, int mycol,
                     view_t *v)
{
    const int my_k = x->k_is_row ? myrow : mycol, my_run = x->k_is_row ? mycol : myrow;
    if (npieces != 1 || x->nruns != 1 || piece->owner != my_k || x->runs[0].owner != my_run)
        return false;
    const int r0 = x->k_is_row ? piece->local : x->runs[0].local;
    const int c0 = x->k_is_row ? x->runs[0].local : piece->local;
    v->p = x->base + r0 + (size_t)c0 * x->lld;
    v->ld = x->lld;
    return true;
}

/* Start the gets of one operand's panel into buffer `slot`. */
static void post_panel(const os_la_rma_t *rma, const operand_t *x, const run_t *piece,
                       int npieces, int width, int slot, os_la_types_t *tc, reqs_t *q)
{
    double *buf = x->buf[slot];
    const int ld = x->k_is_row ? width : x->extent;
    for (int i = 0; i < npieces; i++)
        for (int j = 0; j < x->nruns; j++) {
            const run_t *p = &piece[i], *r = &x->runs[j];
            const int prow = x->k_is_row ? p->owner : r->owner;
            const int pcol = x->k_is_row ? r->owner : p->owner;
            const int src = prow * x->npcol + pcol;
            const int rows = x->k_is_row ? p->len : r->len, cols = x->k_is_row ? r->len : p->len;
            const int r0 = x->k_is_row ? p->local : r->local;
            const int c0 = x->k_is_row ? r->local : p->local;
            double *dst = x->k_is_row ? buf + p->off + (size_t)r->off * ld
                                      : buf + r->off + (size_t)p->off * ld;
            if (src == x->me) { /* this process's own blocks: a copy, no window needed */
                for (int col = 0; col < cols; col++)
                    memcpy(dst + (size_t)col * ld, x->base + r0 + (size_t)(c0 + col) * x->lld,
                           sizeof(double) * (size_t)rows);
                continue;
            }
            const MPI_Aint disp = (MPI_Aint)r0 + (MPI_Aint)c0 * x->lld_of[src];
            MPI_Datatype to = os_la_vtype(tc, rows, cols, ld),
                         from = os_la_vtype(tc, rows, cols, x->lld_of[src]);
            if (rma->gets_complete_per_target_only) {
                rma->get(dst, 1, to, src, disp, 1, from, x->win);
                q->flush = true;
            } else {
                rma->rget(dst, 1, to, src, disp, 1, from, x->win, req_slot(q));
            }
            __atomic_fetch_add(&os_la_stats.pdgemm_gets, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&os_la_stats.pdgemm_get_bytes,
                               (uint64_t)rows * cols * sizeof(double), __ATOMIC_RELAXED);
        }
}

/* A panel of the k range: segments [seg0, seg0 + nseg). */
typedef struct {
    int seg0, nseg, k0, width;
    bool local; /* both operands read in place */
} panel_t;

typedef struct {
    view_t a, b;
} staged_t;

typedef struct {
    const os_la_rma_t *rma;
    operand_t *A, *B;
    const kseg_t *seg;
    run_t *pa, *pb; /* piece scratch, nseg long */
    int my_krow, my_kcol, myrow, mycol;
    os_la_types_t types;
    reqs_t reqs[2];
    bool copy_local;
} kernel_t;

/* Panel p's pieces of each operand, into kn->pa and kn->pb. */
static void pieces_of(kernel_t *kn, const panel_t *p, int *na, int *nb)
{
    *na = kpieces(kn->A, kn->seg + p->seg0, p->nseg, p->k0, kn->pa);
    *nb = kpieces(kn->B, kn->seg + p->seg0, p->nseg, p->k0, kn->pb);
}

/* Point at, or start fetching, panel p's two operands into `slot`. */
static staged_t stage(kernel_t *kn, const panel_t *p, int slot)
{
    staged_t st;
    int na, nb;
    pieces_of(kn, p, &na, &nb);
    if (kn->copy_local || !in_place(kn->A, kn->pa, na, kn->myrow, kn->mycol, &st.a)) {
        post_panel(kn->rma, kn->A, kn->pa, na, p->width, slot, &kn->types, &kn->reqs[slot]);
        st.a = (view_t){ kn->A->buf[slot], kn->A->k_is_row ? p->width : kn->A->extent };
    }
    if (kn->copy_local || !in_place(kn->B, kn->pb, nb, kn->myrow, kn->mycol, &st.b)) {
        post_panel(kn->rma, kn->B, kn->pb, nb, p->width, slot, &kn->types, &kn->reqs[slot]);
        st.b = (view_t){ kn->B->buf[slot], kn->B->k_is_row ? p->width : kn->B->extent };
    }
    return st;
}

/* Are both of panel p's operands read in place? */
static bool panel_local(kernel_t *kn, const panel_t *p)
{
    view_t v;
    int na, nb;
    pieces_of(kn, p, &na, &nb);
    return in_place(kn->A, kn->pa, na, kn->myrow, kn->mycol, &v) &&
           in_place(kn->B, kn->pb, nb, kn->myrow, kn->mycol, &v);
}

/* Scale this process's part of sub(C) by beta (beta = 0: C is not read). */
static void scale_c(double *c, int ldc, int mloc, int nloc, double beta)
{
    if (beta == 1.0)
        return;
    for (int j = 0; j < nloc; j++) {
        double *col = c + (size_t)j * ldc;
        if (beta == 0.0)
            memset(col, 0, sizeof(double) * (size_t)mloc);
        else
            for (int i = 0; i < mloc; i++)
                col[i] *= beta;
    }
}

static int local_cols(const int *desc, int mycol, int npcol)
{
    os_la_dist_t d = { desc[DESC_NB], desc[DESC_CSRC], npcol };
    return os_la_count(&d, desc[DESC_N], mycol);
}

static int local_rows(const int *desc, int myrow, int nprow)
{
    os_la_dist_t d = { desc[DESC_MB], desc[DESC_RSRC], nprow };
    return os_la_count(&d, desc[DESC_M], myrow);
}

/* Does this process read any of the operand's blocks from another process? */
static bool reads_others(const operand_t *x, const kseg_t *seg, int nseg, int myrow, int mycol)
{
    const int my_k = x->k_is_row ? myrow : mycol, my_run = x->k_is_row ? mycol : myrow;
    for (int j = 0; j < x->nruns; j++)
        if (x->runs[j].owner != my_run)
            return true;
    for (int i = 0; i < nseg; i++)
        if (os_la_owner(&x->kdist, x->kg0 + seg[i].k0) != my_k)
            return true;
    return false;
}

bool os_la_pdgemm_rma(const os_la_rma_t *rma, os_la_opts_t o, char ta, char tb, int m, int n,
                      int k, double alpha, const double *a, int ia, int ja, const int *desca,
                      const double *b, int ib, int jb, const int *descb, double beta, double *c,
                      int ic, int jc, const int *descc)
{
    os_la_grid_t g;
    if (!os_la_grid_of(descc[DESC_CTXT], &g))
        return true; /* not in the grid: nothing to do, as in ScaLAPACK */
    const int np = g.nprow * g.npcol, me = g.myrow * g.npcol + g.mycol;
    const bool at = ta != 'N', bt = tb != 'N';

    /* This process's part of sub(C). */
    const os_la_dist_t crow = { descc[DESC_MB], descc[DESC_RSRC], g.nprow },
                       ccol = { descc[DESC_NB], descc[DESC_CSRC], g.npcol };
    const int row0 = os_la_count(&crow, ic - 1, g.myrow);
    const int col0 = os_la_count(&ccol, jc - 1, g.mycol);
    const int mloc = os_la_count(&crow, ic - 1 + m, g.myrow) - row0;
    const int nloc = os_la_count(&ccol, jc - 1 + n, g.mycol) - col0;
    double *cloc = c + row0 + (size_t)col0 * descc[DESC_LLD];
    const bool scale_only = k == 0 || alpha == 0.0;

    /* The operands: A's rows (or columns, transposed) follow C's rows. */
    const os_la_dist_t arow = { desca[DESC_MB], desca[DESC_RSRC], g.nprow },
                       acol = { desca[DESC_NB], desca[DESC_CSRC], g.npcol },
                       brow = { descb[DESC_MB], descb[DESC_RSRC], g.nprow },
                       bcol = { descb[DESC_NB], descb[DESC_CSRC], g.npcol };
    operand_t A = { .base = a, .lld = desca[DESC_LLD], .k_is_row = at,
                    .kdist = at ? arow : acol, .kg0 = at ? ia - 1 : ja - 1, .extent = mloc,
                    .npcol = g.npcol, .me = me, .win = MPI_WIN_NULL };
    operand_t B = { .base = b, .lld = descb[DESC_LLD], .k_is_row = !bt,
                    .kdist = bt ? bcol : brow, .kg0 = bt ? jb - 1 : ib - 1, .extent = nloc,
                    .npcol = g.npcol, .me = me, .win = MPI_WIN_NULL };
    A.nruns = runs_of_mine(&crow, ic - 1, g.myrow, at ? &acol : &arow, at ? ja - 1 : ia - 1, m,
                           &A.runs);
    B.nruns = runs_of_mine(&ccol, jc - 1, g.mycol, bt ? &brow : &bcol, bt ? ib - 1 : jb - 1, n,
                           &B.runs);
    kseg_t *seg;
    const int nseg = ksegs_of(&A.kdist, A.kg0, &B.kdist, B.kg0, scale_only ? 0 : k, &seg);
    const bool work = mloc > 0 && nloc > 0 && nseg > 0;

    /* Every process's leading dimensions, whether its own are legal (the
     * one argument ScaLAPACK checks per process: an illegal one anywhere
     * sends the whole grid to ScaLAPACK, which reports it), and whether it
     * reads other processes' A or B (a window is made only if some
     * process does). */
    int mine[5] = { desca[DESC_LLD], descb[DESC_LLD], 1,
                    work && reads_others(&A, seg, nseg, g.myrow, g.mycol),
                    work && reads_others(&B, seg, nseg, g.myrow, g.mycol) };
    if (mine[0] < 1 || mine[0] < local_rows(desca, g.myrow, g.nprow) || mine[1] < 1 ||
        mine[1] < local_rows(descb, g.myrow, g.nprow) ||
        descc[DESC_LLD] < local_rows(descc, g.myrow, g.nprow) || descc[DESC_LLD] < 1)
        mine[2] = 0;
    int *all = malloc(sizeof(int) * 5 * (size_t)np);
    MPI_Allgather(mine, 5, MPI_INT, all, 5, MPI_INT, g.comm);
    int *lld_a = malloc(sizeof(int) * (size_t)np), *lld_b = malloc(sizeof(int) * (size_t)np);
    bool legal = true, window_a = false, window_b = false;
    for (int p = 0; p < np; p++) {
        lld_a[p] = all[5 * p];
        lld_b[p] = all[5 * p + 1];
        legal = legal && all[5 * p + 2];
        window_a = window_a || all[5 * p + 3];
        window_b = window_b || all[5 * p + 4];
    }
    A.lld_of = lld_a;
    B.lld_of = lld_b;
    free(all);
    if (!legal || scale_only) {
        if (legal)
            scale_c(cloc, descc[DESC_LLD], mloc, nloc, beta);
        free(A.runs);
        free(B.runs);
        free(seg);
        free(lld_a);
        free(lld_b);
        return legal;
    }
    scale_c(cloc, descc[DESC_LLD], mloc, nloc, beta);

    /* Panels: whole segments, at least `want` columns wide. */
    const int want = o.panel > 0 ? o.panel : os_config.la_panel > 0 ? os_config.la_panel : 256;
    panel_t *panel = malloc(sizeof *panel * (size_t)(nseg + 1));
    int npanel = 0, wmax = 0;
    for (int s = 0; s < nseg;) {
        panel_t p = { s, 0, seg[s].k0, 0, false };
        while (s < nseg && (p.width < want || p.nseg == 0)) {
            p.width += seg[s++].len;
            p.nseg++;
        }
        wmax = p.width > wmax ? p.width : wmax;
        panel[npanel++] = p;
    }

    /* The windows: over the caller's arrays, for this call, where some
     * process reads another's. A and B may be one array (C = A A^T): one
     * window then. Gets move whole panels, which cross-memory attach
     * copies at memory speed; sharing the pages instead
     * (onesided_create_share) would cost more to set up and undo per call
     * (about 1 ms per MB) than it saves, so it is declined. */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "onesided_create_share", "0");
    const bool one_window = a == b && !memcmp(desca, descb, sizeof(int) * 9);
    if (one_window)
        window_a = window_b = window_a || window_b;
    if (window_a)
        rma->win_create((void *)a,
                        (MPI_Aint)(sizeof(double) * (size_t)desca[DESC_LLD] *
                                   (size_t)local_cols(desca, g.mycol, g.npcol)),
                        sizeof(double), info, g.comm, &A.win);
    if (one_window)
        B.win = A.win;
    else if (window_b)
        rma->win_create((void *)b,
                        (MPI_Aint)(sizeof(double) * (size_t)descb[DESC_LLD] *
                                   (size_t)local_cols(descb, g.mycol, g.npcol)),
                        sizeof(double), info, g.comm, &B.win);
    MPI_Info_free(&info);

    kernel_t kn = { .rma = rma, .A = &A, .B = &B, .seg = seg, .myrow = g.myrow,
                    .mycol = g.mycol, .copy_local = !o.in_place };
    kn.pa = malloc(sizeof(run_t) * (size_t)(nseg + 1));
    kn.pb = malloc(sizeof(run_t) * (size_t)(nseg + 1));
    for (int s = 0; s < 2 && work; s++) {
        A.buf[s] = malloc(sizeof(double) * (size_t)mloc * wmax);
        B.buf[s] = malloc(sizeof(double) * (size_t)nloc * wmax);
    }

    /* The order: panels read in place first; the rest from a starting
     * panel that differs by process (contention). */
    int *order = malloc(sizeof(int) * (size_t)(npanel + 1)), nord = 0;
    if (work) {
        for (int i = 0; i < npanel && o.in_place; i++)
            if ((panel[i].local = panel_local(&kn, &panel[i])))
                order[nord++] = i;
        const int rest = npanel - nord;
        const int shift = o.stagger && rest ? (int)((long)me * rest / np) : 0;
        int *remote = malloc(sizeof(int) * (size_t)(rest + 1)), nr = 0;
        for (int i = 0; i < npanel; i++)
            if (!panel[i].local)
                remote[nr++] = i;
        for (int i = 0; i < rest; i++)
            order[nord++] = remote[(i + shift) % rest];
        free(remote);
    }

    if (window_a)
        rma->lock_all(MPI_MODE_NOCHECK, A.win);
    if (window_b && !one_window)
        rma->lock_all(MPI_MODE_NOCHECK, B.win);
    staged_t cur = { 0 }, next = { 0 };
    if (nord)
        cur = stage(&kn, &panel[order[0]], 0);
    for (int i = 0; i < nord; i++) {
        const int slot = i % 2;
        if (o.nonblocking && i + 1 < nord)
            next = stage(&kn, &panel[order[i + 1]], 1 - slot);
        for (int r = 0; r < kn.reqs[slot].n; r++)
            MPI_Wait(&kn.reqs[slot].r[r], MPI_STATUS_IGNORE);
        kn.reqs[slot].n = 0;
        if (kn.reqs[slot].flush) { /* also completes the next panel's gets, if posted */
            for (int q = 0; q < np; q++) {
                if (q != me && window_a)
                    rma->flush(q, A.win);
                if (q != me && window_b && !one_window)
                    rma->flush(q, B.win);
            }
            kn.reqs[slot].flush = false;
        }
        const panel_t *p = &panel[order[i]];
        if (p->local)
            __atomic_fetch_add(&os_la_stats.pdgemm_local_panels, 1, __ATOMIC_RELAXED);
        cblas_dgemm(CblasColMajor, at ? CblasTrans : CblasNoTrans, bt ? CblasTrans : CblasNoTrans,
                    mloc, nloc, p->width, alpha, cur.a.p, cur.a.ld, cur.b.p, cur.b.ld, 1.0, cloc,
                    descc[DESC_LLD]);
        if (!o.nonblocking && i + 1 < nord)
            next = stage(&kn, &panel[order[i + 1]], 1 - slot);
        cur = next;
    }
    if (window_b && !one_window)
        rma->unlock_all(B.win);
    if (window_a)
        rma->unlock_all(A.win);
    /* Collective: nobody's A or B is released while another may read it. */
    if (window_b && !one_window)
        rma->win_free(&B.win);
    if (window_a)
        rma->win_free(&A.win);

    os_la_types_free(&kn.types);
    for (int s = 0; s < 2; s++) {
        free(kn.reqs[s].r);
        free(A.buf[s]);
        free(B.buf[s]);
    }
    free(kn.pa);
    free(kn.pb);
    free(order);
    free(panel);
    free(seg);
    free(A.runs);
    free(B.runs);
    free(lld_a);
    free(lld_b);
    return true;
}
