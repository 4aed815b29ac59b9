/*
 * backend_rte_none.c - stands in for backend_rte.c when DPDK is not
 * installed: the rte_malloc column is then reported as unavailable.
 */
#include <stddef.h>

#include "dpmbench.h"

int rte_backend_available(void) { return 0; }
const struct backend *rte_backend_open(void) { return NULL; }
void rte_backend_close(void) {}
