/*
 * objects.h - object files in objects/ (objects.c).
 */
#ifndef ULP_STORE_OBJECTS_H
#define ULP_STORE_OBJECTS_H

#include "store/store_core.h"

/* ------------------------------------------------------------ objects
 * (objects.c) */

void ulp_obj_newname(char name[ULP_OBJ_NAME_LEN]);
/* Open a temporary object file in objects/; fd or -errno. */
int ulp_obj_tmp_open(ulp_store *st, char tmp[32]);
/* fsync tmp, rename to name, fsync objects/, then (remote) pass it to the
 * remote's put hook; 0 or -errno. */
int ulp_obj_publish(ulp_store *st, int fd, const char *tmp, const char *name,
                    int remote);
void ulp_obj_abandon(ulp_store *st, int fd, const char *tmp);
void ulp_obj_unlink(ulp_store *st, const char *name);
/* Unlink every object on the list (once the transaction that deleted
 * their versions has committed), forget them in the reader and the cache,
 * and free the list.  May be called with or without st->mu. */
void ulp_obj_reap(ulp_store *st, ulp_obj_list *dead);
/* Whether name is an object some version still needs: 1, 0 or -errno
 * (mu held). */
int ulp_obj_live(ulp_store *st, const char *name);
/* Recovery: remove temporaries and unreferenced objects. */
int ulp_obj_recover(ulp_store *st);

#endif /* ULP_STORE_OBJECTS_H */
