/*
 * gc.h - the store's background re-encoder (gc.c): flips of older
 * versions into reverse deltas against their successors, and rebases of
 * what depends on deleted versions.  Its state (thread, requests, counters
 * of tests' crash points) is private to gc.c; the store holds a pointer.
 * Called with st->mu as each function says; the thread takes st->mu
 * itself and never holds it while coding.
 */
#ifndef ULP_STORE_GC_H
#define ULP_STORE_GC_H

typedef struct ulp_store ulp_store;

/* Start the thread (store open, after recovery); it starts with a pass, for
 * ghosts or flips an earlier run left.  0 or -errno. */
int ulp_gc_start(ulp_store *st);
/* Give up the pass under way and join the thread (store close); a pass
 * left unfinished is found again at the next open.  Safe if never
 * started. */
void ulp_gc_stop(ulp_store *st);
/* Ask for a whole pass of rebases and flips and wait for it (mu not
 * held); convert: the forward chains of older stores too (ulp_store_gc;
 * not at close).  0 or the pass's error; -ESHUTDOWN when not running. */
int ulp_gc_request(ulp_store *st, int convert);

#endif /* ULP_STORE_GC_H */
