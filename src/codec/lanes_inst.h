/* lanes_inst.h - one instantiation of a kernel header written over vec_lanes.h: the includer
 * defines VL_W, VL_TGT, VL_SFX (and VL_PLAIN for the plain 8-lane width) and VL_KERNELS (the
 * kernel header's name, a string), includes this file, and gets vec_lanes.h and the kernels at
 * that width; every one of those macros is #undef'd after. No include guard on purpose. */
#include "vec_lanes.h"
#include VL_KERNELS
#undef VL_KERNELS
#undef VL_PLAIN
#undef VL_W
#undef VL_TGT
#undef VL_SFX
