/*
 * status_page.h: the status page of the admin endpoints (admin.c), one
 * self-contained HTML file (app/status_page.html: its script and styles
 * inline, nothing fetched but PREFIX/status), compiled in by make as
 * app/status_page.c.
 */
#ifndef RLG_STATUS_PAGE_H
#define RLG_STATUS_PAGE_H

#include <stddef.h>

extern const char rlg_status_page[];
extern const size_t rlg_status_page_len;

#endif
