/*
 * global.c - the process-wide state of global.h. Defined apart from the
 * initialisation (init.c), which every entry point reaches through
 * dpm_ready(), so that the rooms that only read the derived settings do
 * not depend on the room that wires them all together.
 */
#include "global.h"

global_t g;
