/*
 * onesided_pdgemm against ScaLAPACK's pdgemm_ on the same data: random
 * shapes (m, n, k from 0 to 41, odd ones included), every transpose pair
 * (N, T, C), block sizes that do not divide the sizes (square blocks, and
 * each matrix its own), non-zero source processes, submatrices that start on
 * a block boundary and ones that do not, padded leading dimensions that
 * differ by process, alpha and beta of every kind (beta = 0 over a C full
 * of NaN: C is not read), on every grid P processes make (1 x P, P x 1,
 * 2 x 2, and a grid that leaves a process out). Every element of every
 * local array, padding included, must match within
 * 8 (k + 1) eps (|alpha| k + |beta|) (entries lie in [-1, 1]).
 *
 *   test_pdgemm [--interposed] [--cases N]
 *
 * Built a second time as test_pdgemm_preloaded (T_PRELOADED): linked with
 * ScaLAPACK and MPI only, as an unchanged ScaLAPACK program is, and run by
 * onesided-run --la; it finds the library's counters with dlsym and always
 * calls pdgemm_ (--interposed).
 *
 * --interposed calls pdgemm_ itself, with ONESIDED_LA_PDGEMM=1 set by the
 * test: the library must answer it (its counters say so) and match
 * ScaLAPACK's, which the test calls through its own handle on ScaLAPACK.
 * --illegal makes one illegal call: it must reach ScaLAPACK, which reports
 * it (and ends the job, as for any caller).
 */
#include "la_common.h"

typedef void pdgemm_t(const char *, const char *, const int *, const int *, const int *,
                      const double *, const double *, const int *, const int *, const int *,
                      const double *, const int *, const int *, const int *, const double *,
                      double *, const int *, const int *, const int *);
void pdgemm_(const char *, const char *, const int *, const int *, const int *, const double *,
             const double *, const int *, const int *, const int *, const double *, const int *,
             const int *, const int *, const double *, double *, const int *, const int *,
             const int *);

static pdgemm_t *scalapack; /* ScaLAPACK's own, whatever answers pdgemm_ here */

#ifdef T_PRELOADED
/* The preloaded library's entry points, found at run time. */
static void (*get_stats)(onesided_la_stats_t *);
static void (*print_stats)(FILE *);
static pdgemm_t *direct;
#define onesided_la_get_stats get_stats
#define onesided_la_print_stats print_stats
#define onesided_pdgemm direct
#endif
static bool interposed;

static double f_a(int i, int j, void *c) { (void)c; return t_entry(0, i, j); }
static double f_b(int i, int j, void *c) { (void)c; return t_entry(1, i, j); }
static double f_c(int i, int j, void *c) { (void)c; return t_entry(2, i, j); }
static double f_nan(int i, int j, void *c) { (void)i; (void)j; (void)c; return NAN; }

typedef struct {
    char ta, tb;
    int m, n, k;
    int mb[3], nb[3], rsrc[3], csrc[3], pad[3];
    int ia, ja, ib, jb, ic, jc;
    double alpha, beta;
    bool c_nan;
} case_t;

static const char *describe(const case_t *c, char *buf, size_t len)
{
    snprintf(buf, len,
             "%c%c m=%d n=%d k=%d alpha=%g beta=%g blocks A %dx%d B %dx%d C %dx%d src A (%d,%d) "
             "B (%d,%d) C (%d,%d) at A(%d,%d) B(%d,%d) C(%d,%d)%s",
             c->ta, c->tb, c->m, c->n, c->k, c->alpha, c->beta, c->mb[0], c->nb[0], c->mb[1],
             c->nb[1], c->mb[2], c->nb[2], c->rsrc[0], c->csrc[0], c->rsrc[1], c->csrc[1],
             c->rsrc[2], c->csrc[2], c->ia, c->ja, c->ib, c->jb, c->ic, c->jc,
             c->c_nan ? " (C NaN)" : "");
    return buf;
}

static int draw_size(void)
{
    int r = t_between(0, 9);
    return r == 0 ? 1 : r == 1 ? t_between(0, 3) : t_between(2, 41);
}

/* An offset (1-based) for a matrix blocked by b: on a block boundary or not. */
static int draw_offset(int b, bool aligned)
{
    return aligned ? 1 + b * t_between(0, 2) : t_between(1, 9);
}

static case_t draw_case(int nprow, int npcol)
{
    static const char trans[] = "NTCntc";
    static const double alphas[] = { 1.0, -0.5, 2.25, 0.0 }, betas[] = { 0.0, 1.0, -1.5, 0.5 };
    case_t c;
    c.ta = trans[t_between(0, 5)];
    c.tb = trans[t_between(0, 5)];
    c.m = draw_size();
    c.n = draw_size();
    c.k = t_between(0, 19) ? draw_size() : 0;
    const bool square = t_between(0, 1), aligned = t_between(0, 1);
    const int b = t_between(1, 9);
    for (int x = 0; x < 3; x++) {
        c.mb[x] = square ? b : t_between(1, 9);
        c.nb[x] = square ? b : t_between(1, 9);
        c.rsrc[x] = t_between(0, nprow - 1);
        c.csrc[x] = t_between(0, npcol - 1);
        c.pad[x] = t_between(0, 3);
    }
    c.ia = draw_offset(c.mb[0], aligned);
    c.ja = draw_offset(c.nb[0], aligned);
    c.ib = draw_offset(c.mb[1], aligned);
    c.jb = draw_offset(c.nb[1], aligned);
    c.ic = draw_offset(c.mb[2], aligned);
    c.jc = draw_offset(c.nb[2], aligned);
    c.alpha = alphas[t_between(0, 3)];
    c.beta = betas[t_between(0, 3)];
    c.c_nan = c.beta == 0.0 && t_between(0, 1);
    return c;
}

static void run_case(int ctxt, const case_t *c)
{
    const bool an = c->ta == 'N' || c->ta == 'n', bn = c->tb == 'N' || c->tb == 'n';
    /* The matrices: the submatrix plus a margin of 0 to 3 past it. */
    t_mat_t A = t_mat(ctxt, c->ia - 1 + (an ? c->m : c->k) + t_between(0, 3),
                      c->ja - 1 + (an ? c->k : c->m) + t_between(0, 3), c->mb[0], c->nb[0],
                      c->rsrc[0], c->csrc[0], c->pad[0]);
    t_mat_t B = t_mat(ctxt, c->ib - 1 + (bn ? c->k : c->n) + t_between(0, 3),
                      c->jb - 1 + (bn ? c->n : c->k) + t_between(0, 3), c->mb[1], c->nb[1],
                      c->rsrc[1], c->csrc[1], c->pad[1]);
    t_mat_t C = t_mat(ctxt, c->ic - 1 + c->m + t_between(0, 3), c->jc - 1 + c->n + t_between(0, 3),
                      c->mb[2], c->nb[2], c->rsrc[2], c->csrc[2], c->pad[2]);
    t_fill(&A, f_a, NULL, 7.0);
    t_fill(&B, f_b, NULL, 7.0);
    t_fill(&C, c->c_nan ? f_nan : f_c, NULL, 7.0);
    double *ref = malloc(sizeof(double) * C.words), *a0 = malloc(sizeof(double) * A.words),
           *b0 = malloc(sizeof(double) * B.words);
    memcpy(ref, C.mem, sizeof(double) * C.words);
    memcpy(a0, A.mem, sizeof(double) * A.words);
    memcpy(b0, B.mem, sizeof(double) * B.words);
    scalapack(&c->ta, &c->tb, &c->m, &c->n, &c->k, &c->alpha, A.mem, &c->ia, &c->ja, A.desc, B.mem,
              &c->ib, &c->jb, B.desc, &c->beta, ref, &c->ic, &c->jc, C.desc);

    onesided_la_stats_t s0, s1;
    onesided_la_get_stats(&s0);
    if (interposed)
        pdgemm_(&c->ta, &c->tb, &c->m, &c->n, &c->k, &c->alpha, A.mem, &c->ia, &c->ja, A.desc,
                B.mem, &c->ib, &c->jb, B.desc, &c->beta, C.mem, &c->ic, &c->jc, C.desc);
    else
        onesided_pdgemm(&c->ta, &c->tb, &c->m, &c->n, &c->k, &c->alpha, A.mem, &c->ia, &c->ja,
                        A.desc, B.mem, &c->ib, &c->jb, B.desc, &c->beta, C.mem, &c->ic, &c->jc,
                        C.desc);
    onesided_la_get_stats(&s1);

    char what[400];
    const double tol = 8.0 * (c->k + 1) * DBL_EPSILON * (fabs(c->alpha) * c->k + fabs(c->beta));
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < C.words; i++) {
        const double d = fabs(C.mem[i] - ref[i]);
        const bool both_nan = isnan(C.mem[i]) && isnan(ref[i]);
        if (!both_nan && !(d <= tol)) {
            if (!bad++)
                first = i;
            worst = d > worst || isnan(d) ? d : worst;
        }
    }
    T_CHECK(!bad, "%s: %zu of %zu local elements differ (first at %zu: %g against %g; worst %g, "
            "bound %g)", describe(c, what, sizeof what), bad, C.words, first, C.mem[first],
            ref[first], worst, tol);
    T_CHECK(!memcmp(a0, A.mem, sizeof(double) * A.words) &&
                !memcmp(b0, B.mem, sizeof(double) * B.words),
            "%s: A or B changed", describe(c, what, sizeof what));
    /* The kernel took it (nothing went to ScaLAPACK), unless there was
     * nothing to multiply. */
    const bool quick = c->m == 0 || c->n == 0 || ((c->k == 0 || c->alpha == 0.0) && c->beta == 1.0);
    const uint64_t took = (s1.pdgemm_rma - s0.pdgemm_rma) +
                          (s1.pdgemm_scaled_only - s0.pdgemm_scaled_only);
    T_CHECK(s1.pdgemm_fallback == s0.pdgemm_fallback && took == (quick ? 0u : 1u),
            "%s: counted %llu computed here, %llu to ScaLAPACK", describe(c, what, sizeof what),
            (unsigned long long)took,
            (unsigned long long)(s1.pdgemm_fallback - s0.pdgemm_fallback));
    if (interposed)
        T_CHECK(s1.pdgemm_interposed == s0.pdgemm_interposed + 1,
                "%s: pdgemm_ was not answered by the library", describe(c, what, sizeof what));
    free(ref);
    free(a0);
    free(b0);
    free(A.mem);
    free(B.mem);
    free(C.mem);
}

/* --illegal: a call ScaLAPACK rejects goes to ScaLAPACK, which reports it
 * and ends the job, as it does for any caller (the test passes on that
 * report). */
static void illegal_call(int ctxt)
{
    t_mat_t A = t_mat(ctxt, 8, 8, 2, 2, 0, 0, 0);
    t_fill(&A, f_a, NULL, 7.0);
    const int eight = 8, one = 1;
    const double alpha = 1.0, beta = 0.5;
    double *c = malloc(sizeof(double) * A.words);
    onesided_pdgemm("X", "N", &eight, &eight, &eight, &alpha, A.mem, &one, &one, A.desc, A.mem,
                    &one, &one, A.desc, &beta, c, &one, &one, A.desc);
    T_CHECK(false, "an illegal call returned");
    free(c);
    free(A.mem);
}

int main(int argc, char **argv)
{
    int cases = 60;
    bool illegal = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--illegal"))
            illegal = true;
        else if (!strcmp(argv[i], "--interposed"))
            interposed = true;
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc)
            cases = atoi(argv[++i]);
    }
#ifdef T_PRELOADED
    interposed = true;
    get_stats = (void (*)(onesided_la_stats_t *))dlsym(RTLD_DEFAULT, "onesided_la_get_stats");
    print_stats = (void (*)(FILE *))dlsym(RTLD_DEFAULT, "onesided_la_print_stats");
    direct = (pdgemm_t *)dlsym(RTLD_DEFAULT, "onesided_pdgemm");
    if (!get_stats || !print_stats || !direct) {
        fprintf(stderr, "test_pdgemm_preloaded: libonesided_la is not preloaded\n");
        return 1;
    }
#endif
    if (interposed)
        setenv("ONESIDED_LA_PDGEMM", "1", 1); /* read at MPI_Init */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
    void *h = dlopen(OS_LA_SCALAPACK_PATH, RTLD_LAZY | RTLD_LOCAL);
    scalapack = h ? (pdgemm_t *)dlsym(h, "pdgemm_") : NULL;
    if (!scalapack || scalapack == (pdgemm_t *)pdgemm_) {
        fprintf(stderr, "test_pdgemm: ScaLAPACK's own pdgemm_ not found in %s\n",
                OS_LA_SCALAPACK_PATH);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    if (illegal) {
        illegal_call(t_grid(1, t_size));
        return t_finish("test_pdgemm --illegal");
    }
    int grids[4][2];
    const int ngrids = t_grids(grids);
    for (int gi = 0; gi < ngrids; gi++) {
        const int pr = grids[gi][0], pc = grids[gi][1];
        const int ctxt = t_grid(pr, pc);
        const bool in_grid = t_rank < pr * pc;
        for (int i = 0; i < cases; i++) {
            case_t c = draw_case(pr, pc);
            uint64_t seed = t_seed; /* the matrices' margins draw too: every process alike */
            if (in_grid)
                run_case(ctxt, &c);
            t_seed = seed;
            for (int d = 0; d < 6; d++)
                (void)t_next();
        }
        if (in_grid)
            Cblacs_gridexit(ctxt);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (t_rank == 0)
        onesided_la_print_stats(stdout);
    return t_finish(interposed ? "test_pdgemm --interposed" : "test_pdgemm");
}
