/*
 * acl_form.h - the kernel's xattr form of a POSIX ACL (what
 * system.posix_acl_access and _default hold): a little-endian u32 version
 * 2, then entries of u16 tag, u16 perm, u32 id.  Read by acl.c (inheritance,
 * chmod) and vperm.c (read-only views).
 */
#ifndef ULP_STORE_ACL_FORM_H
#define ULP_STORE_ACL_FORM_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define ULP_ACL_USER_OBJ 0x01
#define ULP_ACL_USER 0x02
#define ULP_ACL_GROUP_OBJ 0x04
#define ULP_ACL_GROUP 0x08
#define ULP_ACL_MASK 0x10
#define ULP_ACL_OTHER 0x20
#define ULP_ACL_HDR 4
#define ULP_ACL_ENT 8

static inline unsigned ulp_acl_get16(const uint8_t *p)
{
	return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static inline void ulp_acl_put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* The number of entries of a well-formed value: 0, or -EINVAL. */
static inline int ulp_acl_count(size_t len, size_t *n)
{
	if (len < ULP_ACL_HDR || (len - ULP_ACL_HDR) % ULP_ACL_ENT)
		return -EINVAL;
	*n = (len - ULP_ACL_HDR) / ULP_ACL_ENT;
	return 0;
}

#endif /* ULP_STORE_ACL_FORM_H */
