"""The helper pool's names, settings and job layout: what the pool (``pool.py``, loaded
on every start) and the generator of its LLVM IR (``pool_ir.py``, imported only to
compile it) share. Plain values: importing this imports nothing else."""

SYMBOL = "yota_parallel"
STATS_SYMBOL = "yota_pool_stats"
RESET_SYMBOL = "yota_pool_reset"
BACKOFF_SYMBOL = "yota_pool_back_off"
QUIESCE_SYMBOL = "yota_pool_quiesce"
STEAL_MODE_SYMBOL = "yota_pool_steal_mode"
RUN_SYMBOL = "yota_pool_run"
FIBER_MODE_SYMBOL = "yota_pool_fiber_mode"
GEMM_TILES = {"float32": "yota_sgemm_tiles", "float64": "yota_dgemm_tiles"}
TILE_EXTRA = 7  # the tiled GEMMs' arguments after CBLAS's: nbatch, strides of A, B, C,
#                 axis, step, nslots (emit.py passes them; pool_ir._gemm_tiles takes them)

IDLE_SPIN_NS = 1_000_000  # a helper watches for the next job this long before it sleeps
SPIN_NS = 100_000  # a caller whose chunks are done watches for its helpers this long
STALL_NS = 50_000  # a wait for helpers shorter than this is never counted as a stall
YIELD = True  # spinning threads offer their core every few microseconds (sched_yield)
WINDOW_NS = 2_000_000  # the caller's share of its core is judged over this much of its chunks
CROWDED = 80  # percent: a caller that ran less of its chunks' time shares its core
QUIET_WINDOWS = 16  # windows without spinning after a crowded one
AUTO_MIN = 8  # jobs run alone after a shared job stalled on a crowded core (pool_ir._adapt),
AUTO_MAX = 512  # doubling at each such stall up to this many, halving after
AUTO_CLEAN = 64  # this many shared jobs in a row without a stall
THREAD_CPU = 3  # CLOCK_THREAD_CPUTIME_ID
TILE_CAP = 128  # tile states: a tiled GEMM of more tiles is never revocable
STEAL_NS = 30_000  # a tile's holder that ran less than a quarter of this long loses it
REVOC_MIN_MACS = 1 << 24  # a crowded tiled GEMM of fewer multiply-adds runs alone instead
FIBER_STACK = 8 << 20  # the migrating program's stack (pool_ir._run), mapped once, lazily
UCONTEXT = 1024  # bytes for a glibc x86-64 ucontext_t (968)

# job fields: i64 words of the global @yota_pool_job, each on its own cache line
(GEN, FN, CTX, OPEN, ACTIVE, NEXT, NSLOTS, HELPERS, SLEEPERS, WAITING, SOLO, NOSPIN,
 WIN_OWN, WIN_CPU, N_JOBS, N_ALONE, N_JOINED, N_STALLS, N_CROWDED, CALLER_CPU,
 N_MOVED, AUTO, AUTO_LEN, N_AUTO, CLEAN, H_CROWDED, N_KEPT, STALE, TJOB, STEAL_MODE,
 N_REVOC, N_STOLEN, REVJOB, FMODE, FSTATE, FRC, FHOME, FFN, FARG, FSTACK, RESUME, JOBSEQ,
 FIBER_SET, N_FIBER, PFN, PCTX, PNSLOTS) = range(47)
NWORDS = 47
MASK_WORDS = 16  # a cpu_set_t: 1024 CPUs
HELPER_NAME = "yota-pool"  # the helpers' thread name (Linux)
PR_SET_NAME = 15
LINE = 8  # words per cache line
STATS = ("jobs", "alone", "joined", "stalls", "crowded", "moved", "auto", "kept", "revocable",
         "stolen", "migrating")
# a revocable tile's state word: (job tag << 16) | (holder's epoch << 3) | one of these
T_FREE, T_HELD, T_COMMIT, T_DONE = range(4)
# the migrating program's state (FSTATE)
F_RUNNING, F_SUSPENDED, F_FINISHED = range(3)
