/* Operations that move nothing are no-ops that succeed: a zero count or a
 * zero-size datatype on the origin, target or result side, whatever the
 * other sides' datatypes (mismatched, or of mixed elements), with NULL
 * buffers. Every operation kind, every flavor, every epoch kind, and the
 * request-based forms; target memory and result buffers stay untouched.
 * Run on one node and between (virtual) nodes. */
#include "common.h"

enum { K_PUT, K_GET, K_ACC, K_GACC, K_GACC_NOOP, K_RPUT, K_RGET, K_RACC, K_RGACC, K_NKINDS };
static const char *const kname[K_NKINDS] = { "put", "get", "accumulate", "get_accumulate",
                                             "get_accumulate(NO_OP)", "rput", "rget",
                                             "raccumulate", "rget_accumulate" };
/* Which side is empty, and how. */
enum { Z_ORIGIN_COUNT, Z_TARGET_COUNT, Z_RESULT_COUNT, Z_ORIGIN_TYPE, Z_TARGET_TYPE,
       Z_RESULT_TYPE, Z_ALL, Z_NCASES };
static const char *const zname[Z_NCASES] = { "origin count 0", "target count 0",
                                             "result count 0", "origin type of size 0",
                                             "target type of size 0", "result type of size 0",
                                             "every count 0, NULL buffers" };

static MPI_Datatype empty_type, pair_type;

static int issue(int kind, int zcase, int target, MPI_Aint disp, MPI_Win win, int *obuf,
                 int *rbuf, bool passive)
{
    /* The non-empty sides use types that would not match each other. */
    int oc = 2, tc = 3, rc = 4;
    MPI_Datatype ot = MPI_INT, tt = MPI_DOUBLE, rt = pair_type;
    void *o = obuf, *r = rbuf;
    switch (zcase) {
    case Z_ORIGIN_COUNT: oc = 0; break;
    case Z_TARGET_COUNT: tc = 0; break;
    case Z_RESULT_COUNT: rc = 0; break;
    case Z_ORIGIN_TYPE: ot = empty_type; break;
    case Z_TARGET_TYPE: tt = empty_type; break;
    case Z_RESULT_TYPE: rt = empty_type; break;
    case Z_ALL: oc = tc = rc = 0; o = r = NULL; break;
    }
    /* Only the cases where a side the operation uses is empty apply. */
    bool uses_origin = kind != K_GACC_NOOP; /* a get's origin is where data lands */
    bool uses_result = kind == K_GACC || kind == K_GACC_NOOP || kind == K_RGACC;
    if (((zcase == Z_ORIGIN_COUNT || zcase == Z_ORIGIN_TYPE) && !uses_origin) ||
        ((zcase == Z_RESULT_COUNT || zcase == Z_RESULT_TYPE) && !uses_result))
        return -1;
    if (!passive && kind >= K_RPUT)
        return -1;
    MPI_Request req = MPI_REQUEST_NULL;
    int rcode = MPI_SUCCESS;
    switch (kind) {
    case K_PUT: rcode = MPI_Put(o, oc, ot, target, disp, tc, tt, win); break;
    case K_GET: rcode = MPI_Get(o, oc, ot, target, disp, tc, tt, win); break;
    case K_ACC: rcode = MPI_Accumulate(o, oc, ot, target, disp, tc, tt, MPI_SUM, win); break;
    case K_GACC:
        rcode = MPI_Get_accumulate(o, oc, ot, r, rc, rt, target, disp, tc, tt, MPI_SUM, win);
        break;
    case K_GACC_NOOP:
        rcode = MPI_Get_accumulate(NULL, 0, MPI_DATATYPE_NULL, r, rc, rt, target, disp, tc, tt,
                                   MPI_NO_OP, win);
        break;
    case K_RPUT: rcode = MPI_Rput(o, oc, ot, target, disp, tc, tt, win, &req); break;
    case K_RGET: rcode = MPI_Rget(o, oc, ot, target, disp, tc, tt, win, &req); break;
    case K_RACC:
        rcode = MPI_Raccumulate(o, oc, ot, target, disp, tc, tt, MPI_SUM, win, &req);
        break;
    case K_RGACC:
        rcode = MPI_Rget_accumulate(o, oc, ot, r, rc, rt, target, disp, tc, tt, MPI_SUM, win,
                                    &req);
        break;
    }
    if (rcode == MPI_SUCCESS && req != MPI_REQUEST_NULL)
        rcode = MPI_Wait(&req, MPI_STATUS_IGNORE);
    return rcode;
}

static void check_rc(int rc, const char *flavor, const char *epoch, int kind, int zcase)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len;
    if (rc != MPI_SUCCESS)
        MPI_Error_string(rc, msg, &len);
    CHECK(rc == MPI_SUCCESS, "%s, %s: %s with %s failed: %s", flavor, epoch, kname[kind],
          zname[zcase], msg);
}

enum { E_FENCE, E_PSCW, E_LOCK, E_LOCK_ALL, E_NEPOCHS };
static const char *const ename[E_NEPOCHS] = { "fence", "pscw", "lock", "lock_all" };

static void run(int flavor)
{
    const MPI_Aint bytes = 64;
    t_win_t t = t_win_make(flavor, bytes, MPI_INFO_NULL);
    MPI_Win_set_errhandler(t.win, MPI_ERRORS_RETURN);
    memset(t.base, 0x5a, (size_t)bytes);
    MPI_Group world, peers;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int target = (t_rank + 1) % t_size, source = (t_rank + t_size - 1) % t_size;
    int obuf[8], rbuf[8], rexpect[8];
    for (int i = 0; i < 8; i++)
        obuf[i] = i + 1, rbuf[i] = rexpect[i] = -7;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int e = 0; e < E_NEPOCHS; e++) {
        switch (e) {
        case E_FENCE: MPI_Win_fence(0, t.win); break;
        case E_PSCW: {
            int ranks[2] = { source, target };
            MPI_Group_incl(world, source == target ? 1 : 2, ranks, &peers);
            MPI_Win_post(peers, 0, t.win);
            MPI_Win_start(peers, 0, t.win);
            break;
        }
        case E_LOCK: MPI_Win_lock(MPI_LOCK_SHARED, target, 0, t.win); break;
        case E_LOCK_ALL: MPI_Win_lock_all(0, t.win); break;
        }
        bool passive = e == E_LOCK || e == E_LOCK_ALL;
        for (int k = 0; k < K_NKINDS; k++)
            for (int z = 0; z < Z_NCASES; z++) {
                /* Displacement 0 of a dynamic window is an address nobody
                 * attached: nothing is accessed, so nothing is checked. */
                MPI_Aint disp = flavor == F_DYNAMIC && z != Z_ALL ? t_disp(&t, target, 8) : 0;
                int rc = issue(k, z, target, disp, t.win, obuf, rbuf, passive);
                if (rc >= 0)
                    check_rc(rc, flavor_name[flavor], ename[e], k, z);
            }
        switch (e) {
        case E_FENCE: MPI_Win_fence(0, t.win); break;
        case E_PSCW:
            MPI_Win_complete(t.win);
            MPI_Win_wait(t.win);
            MPI_Group_free(&peers);
            break;
        case E_LOCK: MPI_Win_unlock(target, t.win); break;
        case E_LOCK_ALL: MPI_Win_unlock_all(t.win); break;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int changed = -1;
    for (MPI_Aint i = 0; i < bytes && changed < 0; i++)
        if ((unsigned char)t.base[i] != 0x5a)
            changed = (int)i;
    CHECK(changed < 0, "%s: empty operations changed byte %d of the target window",
          flavor_name[flavor], changed);
    CHECK(!memcmp(rbuf, rexpect, sizeof rbuf), "%s: empty operations wrote the result buffer",
          flavor_name[flavor]);
    MPI_Group_free(&world);
    t_win_free(&t);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_Type_contiguous(0, MPI_INT, &empty_type);
    MPI_Type_commit(&empty_type);
    MPI_Type_contiguous(2, MPI_INT, &pair_type);
    MPI_Type_commit(&pair_type);
    T_FOR_EACH_FLAVOR(f)
        run(f);
    /* Empty operations still obey the epoch rules: outside any epoch the
     * call is erroneous (MPICH checks synchronization first). */
    t_win_t t = t_win_make(F_ALLOCATE, 16, MPI_INFO_NULL);
    MPI_Win_set_errhandler(t.win, MPI_ERRORS_RETURN);
    int rc = MPI_Put(NULL, 0, MPI_INT, (t_rank + 1) % t_size, 0, 0, MPI_INT, t.win), cls = 0;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "an empty MPI_Put outside an epoch returned class %d", cls);
    t_win_free(&t);
    MPI_Type_free(&empty_type);
    MPI_Type_free(&pair_type);
    return t_finish("test_zero_size");
}
