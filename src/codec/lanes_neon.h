/* lanes_neon.h - the NEON level's instantiation of the kernel header VL_KERNELS (defined by the
 * includer): vec_lanes.h's plain width at 8 lanes (vec_lanes_plain.h), names suffixed _neon,
 * built for any GCC/clang target. No include guard on purpose. */
#define VL_W 8
#define VL_PLAIN 1
#define VL_TGT
#define VL_SFX(name) name##_neon
#include "lanes_inst.h"
