/*
 * ulp.h - public API of libulp, the ulpfs trajectory codec.
 *
 * libulp stores a file as a lossless, reference-conditioned delta against an
 * earlier version of the same file.  Floating-point tensors are coded as
 * residuals in units in the last place (ULPs) with an entropy model
 * conditioned on the reference element's exponent; everything else goes
 * through zstd with the reference's bytes as a prefix.
 *
 * The encoded form is an *object*: a self-describing container split into
 * chunks of a few MiB of logical bytes, each carrying the byte runs it covers,
 * a checksum of its stored payload and a checksum of its decoded bytes, so a
 * reader decodes only the chunks a byte range touches and never returns
 * wrong bytes silently.
 *
 * Thread safety: there is no global mutable state.  A ulp_plan and an opened
 * ulp_object are immutable and may be shared by any number of threads.  A
 * ulp_cctx / ulp_dctx holds scratch memory and must be used by one thread at
 * a time; give each worker thread its own.
 *
 * Errors: functions return ULP_OK (0) or a negative ULP_ERR_* code;
 * ulp_strerror() names it.  No function aborts on bad input.
 */
#ifndef ULPFS_ULP_H
#define ULPFS_ULP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

enum {
	ULP_OK = 0,
	ULP_ERR_NOMEM = -1, /* allocation failed */
	ULP_ERR_CORRUPT =
		-2, /* checksum mismatch, truncated or malformed data */
	ULP_ERR_VERSION = -3, /* object format newer than this library */
	ULP_ERR_IO = -4,      /* a read or write callback failed */
	ULP_ERR_ARG = -5,     /* invalid argument (a caller bug) */
	ULP_ERR_REF = -6,     /* the reference given does not fit the object */
	ULP_ERR_PARSE = -7,   /* a file format parser rejected its input */
	ULP_ERR_SIDE = -8,    /* the side reference given (another file of
	                         the checkpoint) does not fit the object */
};

/* A static, human-readable description of an error code. */
const char *ulp_strerror(int err);

/* ---------------------------------------------------------------- dtypes */

/* Element types the codec understands.  ULP_DT_GENERIC is any byte run
 * without float structure (headers, pickles, integer tensors). */
typedef enum ulp_dtype {
	ULP_DT_GENERIC = 0,
	ULP_DT_BF16 = 1,
	ULP_DT_F16 = 2,
	ULP_DT_F32 = 3,
	ULP_DT_F64 = 4,
	ULP_DT_F8E4M3 = 5,
	ULP_DT_F8E5M2 = 6,
	ULP_DT_COUNT = 7
} ulp_dtype;

/* Width in bytes of one element (1 for ULP_DT_GENERIC). */
unsigned ulp_dtype_size(ulp_dtype dt);
/* Short name, e.g. "bf16"; "generic" for ULP_DT_GENERIC. */
const char *ulp_dtype_name(ulp_dtype dt);

/* ----------------------------------------------------------- tensor maps */

typedef enum ulp_format {
	ULP_FMT_UNKNOWN = 0,     /* no structure found: stored generically */
	ULP_FMT_SAFETENSORS = 1, /* safetensors */
	ULP_FMT_TORCHZIP = 2,    /* torch.save zip archive (.pt, .bin, .pth) */
	ULP_FMT_DISTCP = 3,      /* PyTorch DCP __{rank}_{n}.distcp data file */
} ulp_format;

/* One tensor (or torch storage) inside a file. */
typedef struct ulp_tensor {
	char *name;          /* NUL-terminated; owned by the map */
	char dtype_name[24]; /* as the file spells it: "BF16", "I64", "Float" */
	ulp_dtype dtype;     /* coding type; ULP_DT_GENERIC for non-floats */
	uint64_t offset;     /* absolute offset of the first byte in the file */
	uint64_t nbytes;     /* byte length */
	uint32_t ndim;       /* number of dimensions in shape */
	uint64_t *shape;     /* ndim sizes; owned by the map (NULL if ndim 0) */
} ulp_tensor;

/* The tensors of one file, sorted by offset and non-overlapping, each
 * entirely inside the file.  A map with n == 0 means "no structure". */
typedef struct ulp_tensor_map {
	ulp_format format;
	size_t n;
	ulp_tensor *v;
} ulp_tensor_map;

/* Parse the file held in data[0..size) into *out, detecting its format.
 * Never fails on hostile input: a file that is not a well-formed
 * safetensors, torch zip or DCP data file gives format ULP_FMT_UNKNOWN and n == 0 and
 * returns ULP_OK.  Returns ULP_ERR_NOMEM (with *out empty) only when memory
 * runs out.  *out must be released with ulp_tensor_map_free(). */
int ulp_format_parse(const uint8_t *data, uint64_t size, ulp_tensor_map *out);

/* Strict parsers: ULP_OK with a filled map, or ULP_ERR_PARSE (or
 * ULP_ERR_NOMEM) with *out empty.  They validate everything: header lengths,
 * offsets in range and ordered, sizes agreeing with dtype x shape. */
int ulp_safetensors_parse(const uint8_t *data, uint64_t size,
                          ulp_tensor_map *out);
int ulp_torchzip_parse(const uint8_t *data, uint64_t size, ulp_tensor_map *out);
/* A DCP data file: torch.save archives back to back.  Its storages are
 * named "<type>/<bytes>/<k>" (the k-th of that type and size in the file),
 * which stay the same across checkpoints when offsets move. */
int ulp_distcp_parse(const uint8_t *data, uint64_t size, ulp_tensor_map *out);

void ulp_tensor_map_free(ulp_tensor_map *map);

/* A hash of the layout (names, dtype names, shapes, in order) of a map;
 * two files with equal layout hashes hold the same tensors.  0 for an
 * empty map. */
uint64_t ulp_tensor_map_layout_hash(const ulp_tensor_map *map);

/* ----------------------------------------------------------- thread pool */

/* A fixed set of worker threads that run submitted jobs, meant to be the
 * one pool of a process: the codec's chunk workers (ulp_encode_job.pool),
 * a store's read-ahead, its encoders and the CLI's baselines all submit
 * to it, so one size bounds the threads that compute.
 *
 * Contract:
 *  - A job is submitted to a group (ulp_pool_group) and runs once, on a
 *    worker thread or on a thread that waits for its group; queued jobs
 *    of a lane start in submission order.
 *  - Two lanes: a worker takes a job of the low lane (ulp_pool_submit_low)
 *    only when no job of the normal lane is queued.  A running job is
 *    never preempted, so low-lane work (background baselines) is cut into
 *    jobs of bounded length, each queueing its continuation: normal work
 *    then waits at most for the low jobs already running.  A waiter runs
 *    its group's queued jobs of either lane, normal ones first.
 *  - A job may itself submit jobs and wait for them.  A waiter runs the
 *    queued jobs of the group it waits for on its own thread meanwhile
 *    (ulp_pool_group_wait, ulp_pool_group_help), so nested waits cannot
 *    deadlock, even with one worker thread.  What a job must not do is
 *    block on anything that only a job of another group, still queued,
 *    would provide.
 *  - ulp_pool_group_wait returns once every job submitted to the group
 *    has returned; a group is freed only after that.
 *  - ulp_pool_free may be called once no group has unfinished jobs; it
 *    joins the worker threads.
 *  - All functions may be called from any thread, including from jobs.
 *    The worker threads block every signal. */
typedef struct ulp_pool ulp_pool;
typedef struct ulp_pool_group ulp_pool_group;
typedef void (*ulp_pool_fn)(void *arg);

/* A pool of threads workers (0: one per online CPU, at most 256); NULL
 * when it cannot be had. */
ulp_pool *ulp_pool_new(unsigned threads);
unsigned ulp_pool_threads(const ulp_pool *pool);
void ulp_pool_free(ulp_pool *pool);
/* A group of jobs on pool; NULL when out of memory. */
ulp_pool_group *ulp_pool_group_new(ulp_pool *pool);
/* Waits for the group's jobs (ulp_pool_group_wait), then frees it. */
void ulp_pool_group_free(ulp_pool_group *g);
/* Queue fn(arg) in g: ULP_OK, or ULP_ERR_NOMEM (not queued). */
int ulp_pool_submit(ulp_pool_group *g, ulp_pool_fn fn, void *arg);
/* The same in the low lane: run only while no normal job is queued. */
int ulp_pool_submit_low(ulp_pool_group *g, ulp_pool_fn fn, void *arg);
/* Run one queued job of g on the calling thread: 1, or 0 when none of
 * g's jobs is queued (all done or running elsewhere). */
int ulp_pool_group_help(ulp_pool_group *g);
/* Until every job submitted to g has returned, running g's queued jobs on
 * the calling thread. */
void ulp_pool_group_wait(ulp_pool_group *g);
/* Jobs of g submitted and not yet returned. */
size_t ulp_pool_group_pending(ulp_pool_group *g);

/* -------------------------------------------------------------- encoding */

/* The bytes of the reference version, by logical offset.  Must fill
 * buf[0..len) with the reference's bytes at [off, off+len) and return 0, or
 * return a negative ULP_ERR_* code.  The codec never asks for bytes past the
 * reference size it was given.  Called from the thread that encodes or
 * decodes, possibly concurrently from several threads. */
typedef int (*ulp_ref_read_fn)(void *opaque, uint64_t off, void *buf,
                               size_t len);

/* Optional, for callers that hold the reference in memory: a pointer to
 * its bytes [off, off+len), valid until the call that asked returns, or
 * NULL (the codec then reads them with the ulp_ref_read_fn).  Decoding
 * reads a delta stream's reference through it in place instead of
 * copying it first. */
typedef const void *(*ulp_ref_map_fn)(void *opaque, uint64_t off, size_t len);

/* ------------------------------------------- contexts from another file */

/* How the bytes of a side tensor become the reference of a tensor of the
 * new file: as they are (same dtype), or bf16 widened to fp32 (bits << 16:
 * a bf16 copy rounded from fp32 master weights leaves only their low 16
 * bits to code). */
enum { ULP_SIDE_SAME = 0, ULP_SIDE_WIDEN_BF16 = 1, ULP_SIDE_XFORMS = 2 };

/* A tensor of the new file whose reference may be a tensor of another file
 * of the same checkpoint (the side file): len bytes at cur_off of the new
 * file against the side's bytes at side_off, through xform. */
typedef struct ulp_side_match {
	uint64_t cur_off;
	uint64_t len;
	uint64_t side_off;
	uint8_t xform; /* ULP_SIDE_* */
	uint8_t dtype; /* ulp_dtype of the new file's tensor */
} ulp_side_match;

/* Matches sorted by cur_off, non-overlapping. */
typedef struct ulp_side_map {
	size_t n;
	ulp_side_match *v;
} ulp_side_map;

/* Match the float tensors of cur (the new file, read through cur_read)
 * with those of side (read through side_read): every fp32 tensor against
 * a bf16 or fp32 side tensor of the same element count, preferring the
 * side tensors in order (AdamW's state and a master copy follow the
 * parameters' order; safetensors sorts by name), each match verified on
 * sampled elements (bf16: round-to-nearest-even of the fp32 value equals
 * it; fp32: equal).  A tensor without a verified partner gets no match;
 * unreadable bytes make no match either.  ULP_OK (possibly with no match)
 * or ULP_ERR_NOMEM.  Free with ulp_side_map_free(). */
int ulp_side_match_find(const ulp_tensor_map *cur, ulp_ref_read_fn cur_read,
                        void *cur_opaque, const ulp_tensor_map *side,
                        ulp_ref_read_fn side_read, void *side_opaque,
                        ulp_side_map *out);
void ulp_side_map_free(ulp_side_map *m);

/* Encoder parameters; a zeroed struct asks for the defaults. */
typedef struct ulp_params {
	uint32_t chunk_size; /* target logical bytes per chunk; 0: default */
	int generic_level;   /* zstd level for generic bytes; 0: adaptive */
	int model_stats;     /* also compute the alternative-model entropies
	                        of ulp_dtype_stats (slower; for benchmarks) */
} ulp_params;

#define ULP_CHUNK_SIZE_DEFAULT (2u << 20)
#define ULP_CHUNK_SIZE_MIN (4u << 10)
#define ULP_CHUNK_SIZE_MAX (64u << 20)

/* How a file is cut into chunks and which reference bytes each run is
 * coded against.  Built from the tensor maps of the new file and of its
 * reference (matched by name, dtype and shape, not by offset). */
typedef struct ulp_plan ulp_plan;

/* Build a plan.  cur describes the new file of cur_size bytes.  ref may be
 * NULL (no reference: everything is coded standalone); otherwise ref_size is
 * the reference's logical size and ref its tensor map (possibly empty).
 * params may be NULL for defaults. */
int ulp_plan_build(const ulp_tensor_map *cur, uint64_t cur_size,
                   const ulp_tensor_map *ref, uint64_t ref_size,
                   const ulp_params *params, ulp_plan **out);
/* The same with a side file of side_size bytes: the tensors side names
 * may be coded against it instead (each chunk takes, per tensor, whichever
 * of its reference and the side codes smaller).  side may be NULL or
 * empty: then this is ulp_plan_build. */
int ulp_plan_build_side(const ulp_tensor_map *cur, uint64_t cur_size,
                        const ulp_tensor_map *ref, uint64_t ref_size,
                        const ulp_side_map *side, uint64_t side_size,
                        const ulp_params *params, ulp_plan **out);
void ulp_plan_free(ulp_plan *plan);
size_t ulp_plan_chunk_count(const ulp_plan *plan);
/* Logical byte range [*off, *off + *len) of chunk i. */
void ulp_plan_chunk_range(const ulp_plan *plan, size_t i, uint64_t *off,
                          uint32_t *len);
uint64_t ulp_plan_size(const ulp_plan *plan);

/* Per-dtype accounting of an encode, summed over chunks by the caller with
 * ulp_stats_add().  Entropies are empirical entropies, in bits, of the
 * symbols each model sees plus the raw bits, per chunk: what an ideal coder
 * with free side information would spend.  The delta_* entropies are
 * computed only with ulp_params.model_stats, over the ref_elems elements
 * that had a reference, whichever coding was chosen for them. */
typedef struct ulp_dtype_stats {
	uint64_t elems;          /* float elements coded */
	uint64_t delta_elems;    /* of which coded as deltas (or identical) */
	uint64_t ref_elems;      /* of which had a reference */
	uint64_t side_elems;     /* of which coded against a side file */
	uint64_t side_bytes;     /* their payload bytes, tables included */
	uint64_t bytes_in;       /* logical bytes */
	uint64_t bytes_out;      /* payload bytes, tables included */
	double model_bits;       /* entropy of the models actually used */
	double delta_noctx_bits; /* residual symbols without context
	                            (FM-Delta-like) */
	double delta_ctx_bits;   /* in the context of the reference's
	                            exponent (ULPack-like; what ulpfs codes) */
	double delta_prevk_bits; /* exponent x previous element's bit length */
} ulp_dtype_stats;

typedef struct ulp_stats {
	ulp_dtype_stats dt[ULP_DT_COUNT]; /* [ULP_DT_GENERIC]: generic bytes */
	uint64_t chunks_copy;             /* chunks identical to reference */
	uint64_t chunks_delta;            /* chunks with delta-coded floats */
	uint64_t chunks_standalone; /* chunks with standalone floats only */
	uint64_t chunks_side;       /* chunks that read the side file (an
	                               object names a side that none reads
	                               when every run chose its reference) */
} ulp_stats;

void ulp_stats_add(ulp_stats *acc, const ulp_stats *s);

/* Compression context: scratch memory for one thread. */
typedef struct ulp_cctx ulp_cctx;
ulp_cctx *ulp_cctx_new(void);
void ulp_cctx_free(ulp_cctx *cctx);

/* Encode chunk i of plan.  src holds the chunk's logical bytes (the range
 * ulp_plan_chunk_range() gives).  ref_read supplies reference bytes (may be
 * NULL when the plan has no reference).  On success *out points to the
 * encoded chunk (*out_len bytes) inside cctx, valid until the next call on
 * that cctx.  stats, if not NULL, is overwritten with this chunk's figures. */
int ulp_chunk_encode(ulp_cctx *cctx, const ulp_plan *plan, size_t i,
                     const void *src, ulp_ref_read_fn ref_read,
                     void *ref_opaque, const void **out, size_t *out_len,
                     ulp_stats *stats);

/* What a chunk may read besides its own bytes: the reference version's
 * bytes (ref_read) and those of the side file (side_read).  Decoding
 * checks side_hash and side_size, the side version the caller offers,
 * against the side the object names: ULP_ERR_SIDE when they differ or
 * when a chunk coded against a side is given none. */
typedef struct ulp_refs {
	ulp_ref_read_fn ref_read;
	void *ref_opaque;
	ulp_ref_map_fn ref_map; /* optional, with ref_opaque */
	ulp_ref_read_fn side_read;
	void *side_opaque;
	const uint8_t *side_hash;
	uint64_t side_size;
} ulp_refs;

/* ulp_chunk_encode with a side file (refs->side_read; needed when the
 * plan was built with side matches). */
int ulp_chunk_encode_refs(ulp_cctx *cctx, const ulp_plan *plan, size_t i,
                          const void *src, const ulp_refs *refs,
                          const void **out, size_t *out_len, ulp_stats *stats);

/* Encode chunk i of plan as identical to the reference, without reading
 * either: what the caller knows of bytes it did not change (a file
 * patched in place).  ULP_ERR_REF when the plan does not code every run
 * of the chunk against the same offsets of the reference, all of them
 * inside it (then encode it with ulp_chunk_encode).  Output and stats as
 * ulp_chunk_encode. */
int ulp_chunk_encode_copy(ulp_cctx *cctx, const ulp_plan *plan, size_t i,
                          const void **out, size_t *out_len, ulp_stats *stats);

/* ------------------------------------------------------------- container */

/* Object writer: streams a header, the encoded chunks in order and a final
 * index to a sink.  The sink must write all len bytes and return 0, or return
 * a negative ULP_ERR_* code. */
typedef int (*ulp_write_fn)(void *opaque, const void *buf, size_t len);

typedef struct ulp_writer ulp_writer;

/* ref_hash: the content hash (16 bytes, either kind) of the reference's
 * logical bytes, or NULL when there is no reference; readers compare it
 * with the reference they are given.  The object's own file hash is of
 * kind ULP_HASH_TREE; ulp_writer_new_kind with ULP_HASH_FLAT writes one
 * whose file hash is the whole-file XXH3-128 (what re-encoding a version
 * committed with one needs; format 3 wrote those as format 2, format 4
 * says it in a header flag). */
int ulp_writer_new(ulp_write_fn write, void *opaque, const uint8_t *ref_hash,
                   uint64_t ref_size, ulp_writer **out);
int ulp_writer_new_kind(ulp_write_fn write, void *opaque,
                        const uint8_t *ref_hash, uint64_t ref_size,
                        int hash_kind, ulp_writer **out);
/* Append the next chunk, exactly as ulp_chunk_encode() produced it for the
 * logical range [off, off+len); chunks must be added in order and cover the
 * file without gaps. */
int ulp_writer_add_chunk(ulp_writer *w, uint64_t off, uint32_t len,
                         const void *enc, size_t enc_len,
                         uint64_t decoded_xxh3);
/* The same with enc_xxh3 = XXH3_64bits(enc, enc_len) computed by the
 * caller: by the thread that encoded the chunk, so that a writer adding
 * the chunks of several threads does not hash every coded byte alone. */
int ulp_writer_add_chunk_hashed(ulp_writer *w, uint64_t off, uint32_t len,
                                const void *enc, size_t enc_len,
                                uint64_t decoded_xxh3, uint64_t enc_xxh3);
/* Write the index and trailer.  file_hash is the content hash of all
 * logical bytes, of the writer's kind.  Returns the total object size in
 * *total. */
int ulp_writer_finish(ulp_writer *w, const uint8_t file_hash[16],
                      uint64_t *total);
void ulp_writer_free(ulp_writer *w);
/* A writer whose object also names a side file (side_hash, side_size:
 * another file's version, content hash of either kind) that chunks may
 * be coded against.  Such an object needs a decoder that knows side files:
 * older ones refuse it (ULP_ERR_VERSION). */
int ulp_writer_new_side(ulp_write_fn write, void *opaque,
                        const uint8_t *ref_hash, uint64_t ref_size,
                        const uint8_t *side_hash, uint64_t side_size,
                        int hash_kind, ulp_writer **out);

/* One-call streaming encoder: plan, encode with nthreads worker threads
 * (0: one per online CPU) keeping a bounded number of chunks in flight, and
 * stream the object to write.  cur[0..cur_size) is the new file (typically
 * mmapped); cur_map and ref_map are its and the reference's tensor maps
 * from ulp_format_parse() (NULL: no tensors known).  With has_ref, the
 * object is coded against the reference of ref_size bytes whose XXH3-128 is
 * ref_hash, read through ref_read.  stats (may be NULL) receives the sums
 * over all chunks; hash_out (may be NULL) the content hash of cur (the
 * object's file hash); object_size (may be NULL) the bytes written.
 *
 * Instead of cur, the new file's bytes may be pulled chunk by chunk
 * through cur_read (cur NULL): each worker reads the chunk it encodes into
 * a buffer of its slot, so memory stays bounded by the chunks in flight
 * however large the file, and nothing needs to be mapped or seekable
 * (a version decoded through a cache, say).  cur_read follows the contract
 * of ulp_ref_read_fn over the new file's cur_size bytes; it is called
 * concurrently from the worker threads, at most once per byte, never
 * inside holes or same ranges. */
typedef struct ulp_encode_job {
	const uint8_t *cur;
	uint64_t cur_size;
	ulp_ref_read_fn cur_read;
	void *cur_opaque;
	const ulp_tensor_map *cur_map;
	int has_ref;
	uint64_t ref_size;
	const ulp_tensor_map *ref_map;
	const uint8_t *ref_hash;
	ulp_ref_read_fn ref_read;
	void *ref_opaque;
	ulp_params params;
	unsigned nthreads;
	/* The pool the chunk workers run on (NULL: nthreads threads of
	 * their own, started for this call).  At most nthreads of this
	 * job's chunks are encoded at once; the calling thread writes them
	 * and, while it waits, encodes queued chunks itself (so a job of the
	 * same pool may call this).  Without cctx, the contexts come from
	 * the pool and stay warm for its next jobs. */
	ulp_pool *pool;
	/* nthreads contexts to reuse (their scratch memory stays warm from
	 * one file to the next), or NULL to create them per call */
	ulp_cctx *const *cctx;
	ulp_write_fn write;
	void *write_opaque;
	/* Called from the calling thread after each chunk is written, with
	 * the logical bytes done and the total.  May be NULL. */
	void (*progress)(void *opaque, uint64_t done, uint64_t total);
	void *progress_opaque;
	/* Ranges of cur known to be zeros (a sparse file's holes): nholes
	 * pairs [lo, hi), sorted and disjoint.  A chunk inside one (and not
	 * in a same range) is coded as zeros, standalone: one generic run
	 * without reference, whatever the plan says, so that neither cur
	 * (whose pages there are never read) nor the reference is read for
	 * it.  May be NULL. */
	const uint64_t (*holes)[2];
	size_t nholes;
	/* Ranges of the new file known to equal the reference's bytes at
	 * the same offsets (what a patch left unchanged), nsame pairs
	 * [lo, hi), sorted and disjoint; needs has_ref.  A chunk inside one
	 * is coded as identical (ulp_chunk_encode_copy) and hashed from the
	 * reference's bytes: cur is not read there (it may be a sparse copy
	 * holding only what changed).  May be NULL. */
	const uint64_t (*same)[2];
	size_t nsame;
	/* The XXH3-64 of the reference's decoded bytes [off, off + len) when
	 * one chunk of its object covers exactly that range (from its index:
	 * nothing decoded): 1 and *xxh3, else 0.  With it a chunk inside a
	 * same range is neither read nor hashed from the reference.  Called
	 * with ref_opaque, from any encoding thread.  May be NULL. */
	int (*ref_chunk_hash)(void *opaque, uint64_t off, uint32_t len,
	                      uint64_t *xxh3);
	/* Write an object whose file hash is ULP_HASH_FLAT (0:
	 * ULP_HASH_TREE). */
	int flat_hash;
	/* The content hash of cur (of the kind flat_hash says) when the
	 * caller knows it already, cur being a copy of the reference: the
	 * encoder does not hash.  May be NULL. */
	const uint8_t *known_hash;
	/* A side file (another file of the same checkpoint) the tensors
	 * side_map names may be coded against: its content hash (NULL: no
	 * side) and size, and its bytes through side_read (called like
	 * ref_read, with side_opaque).  Each such tensor takes whichever of
	 * the reference and the side codes smaller. */
	const uint8_t *side_hash;
	uint64_t side_size;
	const ulp_side_map *side_map;
	ulp_ref_read_fn side_read;
	void *side_opaque;
} ulp_encode_job;

int ulp_encode_file(const ulp_encode_job *job, ulp_stats *stats,
                    uint8_t hash_out[16], uint64_t *object_size);

/* ---------------------------------------------------------------- reading */

/* Random-access reads of the encoded object.  Must fill buf[0..len) with
 * the object's bytes at off and return 0, or a negative ULP_ERR_* code. */
typedef int (*ulp_read_at_fn)(void *opaque, uint64_t off, void *buf,
                              size_t len);

typedef struct ulp_object ulp_object;

/* Open an object of obj_size bytes: read and verify its header, trailer and
 * index (all checksummed).  The returned object is immutable and may be
 * used from many threads while read_at stays valid. */
int ulp_object_open(ulp_read_at_fn read_at, void *opaque, uint64_t obj_size,
                    ulp_object **out);
/* The same for an object held in memory (data[0..size), which must stay
 * valid and unchanged until ulp_object_close): chunk payloads are then
 * decoded where they lie instead of being copied out first. */
int ulp_object_open_mem(const void *data, uint64_t size, ulp_object **out);
void ulp_object_close(ulp_object *obj);

uint64_t ulp_object_size(const ulp_object *obj); /* logical bytes */
size_t ulp_object_chunk_count(const ulp_object *obj);
/* Whether the object was coded against a reference, its logical size and
 * its XXH3-128 (canonical form). */
int ulp_object_has_ref(const ulp_object *obj);
uint64_t ulp_object_ref_size(const ulp_object *obj);
const uint8_t *ulp_object_ref_hash(const ulp_object *obj);
/* The content hash of the whole logical content, of the object's kind
 * (ulp_object_hash_kind: ULP_HASH_TREE from format 3 unless the header
 * says ULP_HASH_FLAT, which formats 1 and 2 always have).
 * The reference hash is whatever the writer was given: the reference's
 * content hash of either kind. */
const uint8_t *ulp_object_file_hash(const ulp_object *obj);
int ulp_object_hash_kind(const ulp_object *obj);
void ulp_object_chunk_range(const ulp_object *obj, size_t i, uint64_t *off,
                            uint32_t *len);
/* Stored bytes of chunk i (payload only). */
uint32_t ulp_object_chunk_stored(const ulp_object *obj, size_t i);
/* XXH3-64 of chunk i's decoded bytes, as the index records it (what
 * ulp_chunk_decode checks them against). */
uint64_t ulp_object_chunk_hash(const ulp_object *obj, size_t i);
/* Index of the chunk holding logical offset off (off < size). */
size_t ulp_object_chunk_at(const ulp_object *obj, uint64_t off);
/* Whether decoding chunk i needs reference bytes. */
int ulp_object_chunk_needs_ref(const ulp_object *obj, size_t i);
/* Whether the object names a side file, its size and content hash, and
 * whether chunk i reads it. */
int ulp_object_has_side(const ulp_object *obj);
uint64_t ulp_object_side_size(const ulp_object *obj);
const uint8_t *ulp_object_side_hash(const ulp_object *obj);
int ulp_object_chunk_needs_side(const ulp_object *obj, size_t i);

typedef struct ulp_dctx ulp_dctx;
ulp_dctx *ulp_dctx_new(void);
void ulp_dctx_free(ulp_dctx *dctx);
/* Whether decoding with dctx checks each stored payload's checksum
 * before decoding it (on, the default).  Off, corruption is still
 * reported, as ULP_ERR_CORRUPT, by the decoded bytes' checksum (or an
 * error of the decoder): for reads that want speed; a verification
 * that must name the stored bytes as bad keeps it on. */
void ulp_dctx_set_payload_check(ulp_dctx *dctx, int on);

/* Check chunk i's stored payload against its checksum without decoding
 * it: ULP_OK, ULP_ERR_CORRUPT or a read error.  A verification runs it
 * where decodes skip that check (ulp_dctx_set_payload_check) or were made
 * before it (a cache of decoded chunks). */
int ulp_chunk_check_payload(ulp_dctx *dctx, const ulp_object *obj, size_t i);

/* Decode chunk i into dst (ulp_object_chunk_range() gives its length).
 * Verifies the stored payload's checksum before decoding (unless
 * ulp_dctx_set_payload_check turned it off) and the decoded bytes'
 * checksum after: on ULP_ERR_CORRUPT the contents of dst are
 * unspecified and must not be used. */
int ulp_chunk_decode(ulp_dctx *dctx, const ulp_object *obj, size_t i,
                     ulp_ref_read_fn ref_read, void *ref_opaque, void *dst);

/* Decode logical bytes [off, off+len) into dst, touching only the chunks
 * the range overlaps.  The range must lie inside the object. */
int ulp_object_read(ulp_dctx *dctx, const ulp_object *obj, uint64_t off,
                    void *dst, size_t len, ulp_ref_read_fn ref_read,
                    void *ref_opaque);

/* The same two with a side file (see ulp_refs). */
int ulp_chunk_decode_refs(ulp_dctx *dctx, const ulp_object *obj, size_t i,
                          const ulp_refs *refs, void *dst);
int ulp_object_read_refs(ulp_dctx *dctx, const ulp_object *obj, uint64_t off,
                         void *dst, size_t len, const ulp_refs *refs);

/* ------------------------------------------------------------ utilities */

/* Benchmark baseline: the size a byte-grouped, order-0 entropy coder
 * (ZipNN-like) gives data[0..len): each byte plane of width-byte elements,
 * per block of ULP_CHUNK_SIZE_DEFAULT bytes, rANS-coded with its own table
 * (tables included).  A trailing partial element counts as raw bytes. */
int ulp_baseline_bytegroup(const void *data, size_t len, unsigned width,
                           uint64_t *out_size);

/* XXH3-128 of data in canonical (big-endian) form. */
void ulp_hash128(const void *data, size_t len, uint8_t out[16]);

/* Content hashes (a version's identity, an object's file hash).  From
 * object format 3 it is a one-level tree (ULP_HASH_TREE): the XXH3-128
 * (canonical form) of the XXH3-64s (u64 little-endian each) of the
 * content's consecutive ULP_HASH_LEAF-byte blocks, the last one shorter,
 * followed by ULP_HASH_LEAF and the total length (u64 little-endian).  The
 * leaf is the default chunk size, so each chunk of a generic file is one
 * leaf, whose hash the object's index holds: an unchanged chunk is hashed
 * without decoding it.  Formats 1-2 hash the whole content with XXH3-128
 * (ULP_HASH_FLAT, ulp_hash128). */
#define ULP_HASH_LEAF ULP_CHUNK_SIZE_DEFAULT
enum { ULP_HASH_FLAT = 1, ULP_HASH_TREE = 2 };
typedef struct ulp_hasher ulp_hasher;
/* NULL when out of memory or kind is unknown. */
ulp_hasher *ulp_hasher_new(int kind);
void ulp_hasher_update(ulp_hasher *h, const void *data, size_t len);
/* Add the next len bytes by their XXH3-64, without reading them: a whole
 * leaf (len == ULP_HASH_LEAF), or the last, shorter one.  ULP_ERR_ARG
 * (nothing added) unless the tree hasher stands at a leaf boundary. */
int ulp_hasher_leaf(ulp_hasher *h, uint64_t leaf_hash, uint64_t len);
/* ULP_ERR_ARG when bytes were added after a short leaf. */
int ulp_hasher_final(ulp_hasher *h, uint8_t out[16]);
void ulp_hasher_free(ulp_hasher *h);
int ulp_content_hash(int kind, const void *data, size_t len, uint8_t out[16]);
/* Lower-case hex of a 128-bit hash; out must hold 33 bytes. */
void ulp_hash128_hex(const uint8_t h[16], char out[33]);

#ifdef __cplusplus
}
#endif
#endif /* ULPFS_ULP_H */
