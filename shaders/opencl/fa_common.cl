/* flashattn OpenCL C 1.2: what every kernel shares. Built with -D options from
 * backends/opencl/opencl_attention.c:
 *   FA_DTYPE 1 f32, 2 f16, 3 bf16 (storage type of q, k, v, o and the gradients);
 *   FA_D head dim (a multiple of 8); FA_NT work-items per work-group; FA_BM query rows and
 *   FA_BN keys per tile; FA_CAUSAL 0/1; FA_GQA query heads per key/value head;
 *   FA_S_TX, FA_O_TX, FA_K_TX: work-items along the columns of the (BM x BN), (BM x D) and
 *   (BN x D) register tiles (see "A register tile" below).
 * Tiles live in __local memory as f32, converted once when loaded; every sum is f32.
 * f16 goes through vload_half/vstore_half (no cl_khr_fp16), bf16 through bit conversion. */

/* Full unrolling of the register-tile loops: what GPU compilers need to keep the tiles in
 * registers. CPU implementations (PoCL) compile much faster without the hint. */
#if FA_UNROLL_LOOPS
#define FA_UNROLL _Pragma("unroll")
#else
#define FA_UNROLL
#endif

#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f

#if FA_DTYPE == 1
typedef float fa_st;
#elif FA_DTYPE == 2 || FA_DTYPE == 3
typedef ushort fa_st;
#else
#error "FA_DTYPE must be 1 (f32), 2 (f16) or 3 (bf16)"
#endif

/* Padded row lengths of local tiles, in floats: rows stay 16-byte aligned for vload4 and
 * successive rows start in different banks. */
#define FA_LDS (FA_D + 4)
#define FA_LDP (FA_BN + 4)

inline ushort fa_f32_to_bf16(float f)
{
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (ushort)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);         /* round to nearest even */
    return (ushort)(u >> 16);
}

inline float4 fa_load4(__global const fa_st *p, long i)
{
#if FA_DTYPE == 1
    return vload4(0, p + i);
#elif FA_DTYPE == 2
    return vload_half4(0, (__global const half *)(p + i));
#else
    return as_float4(convert_uint4(vload4(0, p + i)) << 16);
#endif
}

inline void fa_store(__global fa_st *p, long i, float v)
{
#if FA_DTYPE == 1
    p[i] = v;
#elif FA_DTYPE == 2
    vstore_half_rte(v, 0, (__global half *)(p + i));
#else
    p[i] = fa_f32_to_bf16(v);
#endif
}

/* Copies `rows` rows of D elements, row r at src[base + r * stride], into the local f32 tile
 * dst (FA_LDS floats per row); rows from `valid` to `rows` are zero. Consecutive work-items
 * read consecutive columns (coalesced). */
inline void fa_tile_load(__local float *dst, __global const fa_st *src, long base, long stride,
                         int valid, int rows)
{
    for (int e = (int)get_local_id(0); e < rows * (FA_D / 4); e += FA_NT) {
        int r = e / (FA_D / 4);
        int c = (e - r * (FA_D / 4)) * 4;
        float4 v = (float4)(0.0f);
        if (r < valid)
            v = fa_load4(src, base + (long)r * stride + c);
        vstore4(v, 0, dst + r * FA_LDS + c);
    }
}

/* A register tile: an R x C block of results spread over FA_NT work-items, TX of them along
 * the columns. Work-item (ty, tx) owns rows ty + (FA_NT / TX) * i and columns tx + TX * j, so
 * that neighbours touch neighbouring columns of local memory. */
#define FA_TY(TX) (FA_NT / (TX))
#define FA_TM(R, TX) ((R) / FA_TY(TX))
#define FA_TN(C, TX) ((C) / (TX))

/* acc[i][j] += dot(A[row_i][0..D), B[col_j][0..D)) for D-wide local tiles A, B (FA_LDS rows):
 * the Q K^T and dO V^T products. */
#define FA_DOT_TILE(acc, A, B, TM_, TN_, TY_, TX_, ty, tx)                                       \
    for (int d_ = 0; d_ < FA_D; d_ += 4) {                                                        \
        float4 a_[TM_], b_[TN_];                                                                  \
        FA_UNROLL for (int i_ = 0; i_ < TM_; i_++) a_[i_] =                               \
            vload4(0, A + ((ty) + (TY_) * i_) * FA_LDS + d_);                                     \
        FA_UNROLL for (int j_ = 0; j_ < TN_; j_++) b_[j_] =                               \
            vload4(0, B + ((tx) + (TX_) * j_) * FA_LDS + d_);                                     \
        FA_UNROLL for (int i_ = 0; i_ < TM_; i_++)                                        \
            FA_UNROLL for (int j_ = 0; j_ < TN_; j_++) {                                  \
                acc[i_][j_] = fma(a_[i_].x, b_[j_].x, acc[i_][j_]);                               \
                acc[i_][j_] = fma(a_[i_].y, b_[j_].y, acc[i_][j_]);                               \
                acc[i_][j_] = fma(a_[i_].z, b_[j_].z, acc[i_][j_]);                               \
                acc[i_][j_] = fma(a_[i_].w, b_[j_].w, acc[i_][j_]);                               \
            }                                                                                     \
    }

/* acc[i][j] += sum over c < n of A[row_i][c] * B[c][col_j], for a local score tile A (FA_LDP
 * floats per row) and a D-wide local tile B (FA_LDS per row): the P V and dS K products. */
#define FA_OUTER_TILE(acc, A, B, TM_, TN_, TY_, TX_, ty, tx, n)                                   \
    for (int c_ = 0; c_ < (n); c_++) {                                                            \
        float a_[TM_], b_[TN_];                                                                   \
        FA_UNROLL for (int i_ = 0; i_ < TM_; i_++) a_[i_] = A[((ty) + (TY_) * i_) * FA_LDP + c_]; \
        FA_UNROLL for (int j_ = 0; j_ < TN_; j_++) b_[j_] = B[c_ * FA_LDS + (tx) + (TX_) * j_];   \
        FA_UNROLL for (int i_ = 0; i_ < TM_; i_++)                                                \
            FA_UNROLL for (int j_ = 0; j_ < TN_; j_++) acc[i_][j_] =                              \
                fma(a_[i_], b_[j_], acc[i_][j_]);                                                 \
    }
