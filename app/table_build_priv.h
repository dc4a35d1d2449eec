/*
 * table_build_priv.h: what table.c does with a table file it holds the
 * flock of (table_build.c): adopt it, resize it, or build one anew.
 */
#ifndef RLG_TABLE_BUILD_PRIV_H
#define RLG_TABLE_BUILD_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "table_mem_priv.h"

bool tbl_is_of(const struct tbl_header *h, const struct tbl_ident *id);
int tbl_adopt(const char *path, int fd, const struct tbl_header *h,
    const struct tbl_ident *id, struct tbl **out, char *err, size_t errsize);
int tbl_migrate(const char *path, int fd, const struct tbl_header *h,
    const struct tbl_ident *id, uint64_t capacity, const char *boot,
    struct tbl **out, char *err, size_t errsize);
int tbl_build(const char *path, const struct tbl_ident *id, uint64_t capacity,
    const char *boot, tbl_seed_fn *seed, void *ctx, struct tbl **out,
    char *err, size_t errsize);

#endif
