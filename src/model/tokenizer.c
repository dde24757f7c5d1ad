/*
 * tokenizer.c - SentencePiece ("llama") and GPT-2 byte-level BPE ("gpt2") tokenizers built from
 * a GGUF vocabulary, reproducing llama.cpp's src/llama-vocab.cpp and src/unicode.cpp.
 *
 * Layout: token strings live in one arena, an open-addressing hash maps string -> id (for BPE
 * a second one maps (left, right) -> merge rank). Tokenizing allocates per call (the vocab is
 * read-only), so several threads may tokenize with one vocab.
 *
 * SPM (llm_tokenizer_spm): the fragment (with a leading ' ' when the space prefix applies) has
 * ' ' replaced by U+2581, is split into UTF-8 characters, and adjacent pairs whose concatenation
 * is a token go into a max-heap keyed (score desc, left index asc); the best pair is merged, its
 * neighbours re-queued, stale entries skipped. Symbols that are not tokens fall back to <0xXX>.
 * O(n log n) over the fragment.
 * BPE (llm_tokenizer_bpe): UTF-8 -> code points (invalid bytes -> U+FFFD), the GPT-2 regex split
 * written by hand (unicode_regex_split_custom_gpt2), each word byte-encoded with GPT-2's
 * bytes_to_unicode table and merged by rank with a min-heap.
 */
#include "model/tokenizer.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Unicode classes                                                                             */

/* Unicode letter/number classes (\p{L}, \p{N}) as ranges: entry = start << 2 | class,
 * class 0 = other, 1 = letter, 2 = number; a range runs to the next entry's start.
 * Data derived from llama.cpp's src/unicode-data.cpp (MIT, llama.cpp authors). */
static const uint32_t ucat_ranges[1546] = {
    0x0000000, 0x00000C2, 0x00000E8, 0x0000105, 0x000016C, 0x0000185, 0x00001EC, 0x00002A9,
    0x00002AC, 0x00002CA, 0x00002D0, 0x00002D5, 0x00002D8, 0x00002E6, 0x00002E9, 0x00002EC,
    0x00002F2, 0x00002FC, 0x0000301, 0x000035C, 0x0000361, 0x00003DC, 0x00003E1, 0x0000B08,
    0x0000B19, 0x0000B48, 0x0000B81, 0x0000B94, 0x0000BB1, 0x0000BB4, 0x0000BB9, 0x0000BBC,
    0x0000DC1, 0x0000DD4, 0x0000DD9, 0x0000DE0, 0x0000DE9, 0x0000DF8, 0x0000DFD, 0x0000E00,
    0x0000E19, 0x0000E1C, 0x0000E21, 0x0000E2C, 0x0000E31, 0x0000E34, 0x0000E39, 0x0000E88,
    0x0000E8D, 0x0000FD8, 0x0000FDD, 0x0001208, 0x0001229, 0x00014C0, 0x00014C5, 0x000155C,
    0x0001565, 0x0001568, 0x0001581, 0x0001624, 0x0001741, 0x00017AC, 0x00017BD, 0x00017CC,
    0x0001881, 0x000192C, 0x0001982, 0x00019A8, 0x00019B9, 0x00019C0, 0x00019C5, 0x0001B50,
    0x0001B55, 0x0001B58, 0x0001B95, 0x0001B9C, 0x0001BB9, 0x0001BC2, 0x0001BE9, 0x0001BF4,
    0x0001BFD, 0x0001C00, 0x0001C41, 0x0001C44, 0x0001C49, 0x0001CC0, 0x0001D35, 0x0001E98,
    0x0001EC5, 0x0001EC8, 0x0001F02, 0x0001F29, 0x0001FAC, 0x0001FD1, 0x0001FD8, 0x0001FE9,
    0x0001FEC, 0x0002001, 0x0002058, 0x0002069, 0x000206C, 0x0002091, 0x0002094, 0x00020A1,
    0x00020A4, 0x0002101, 0x0002164, 0x0002181, 0x00021AC, 0x00021C1, 0x0002220, 0x0002225,
    0x000223C, 0x0002281, 0x0002328, 0x0002411, 0x00024E8, 0x00024F5, 0x00024F8, 0x0002541,
    0x0002544, 0x0002561, 0x0002588, 0x000259A, 0x00025C0, 0x00025C5, 0x0002604, 0x0002615,
    0x0002634, 0x000263D, 0x0002644, 0x000264D, 0x00026A4, 0x00026A9, 0x00026C4, 0x00026C9,
    0x00026CC, 0x00026D9, 0x00026E8, 0x00026F5, 0x00026F8, 0x0002739, 0x000273C, 0x0002771,
    0x0002778, 0x000277D, 0x0002788, 0x000279A, 0x00027C1, 0x00027C8, 0x00027D2, 0x00027E8,
    0x00027F1, 0x00027F4, 0x0002815, 0x000282C, 0x000283D, 0x0002844, 0x000284D, 0x00028A4,
    0x00028A9, 0x00028C4, 0x00028C9, 0x00028D0, 0x00028D5, 0x00028DC, 0x00028E1, 0x00028E8,
    0x0002965, 0x0002974, 0x0002979, 0x000297C, 0x000299A, 0x00029C0, 0x00029C9, 0x00029D4,
    0x0002A15, 0x0002A38, 0x0002A3D, 0x0002A48, 0x0002A4D, 0x0002AA4, 0x0002AA9, 0x0002AC4,
    0x0002AC9, 0x0002AD0, 0x0002AD5, 0x0002AE8, 0x0002AF5, 0x0002AF8, 0x0002B41, 0x0002B44,
    0x0002B81, 0x0002B88, 0x0002B9A, 0x0002BC0, 0x0002BE5, 0x0002BE8, 0x0002C15, 0x0002C34,
    0x0002C3D, 0x0002C44, 0x0002C4D, 0x0002CA4, 0x0002CA9, 0x0002CC4, 0x0002CC9, 0x0002CD0,
    0x0002CD5, 0x0002CE8, 0x0002CF5, 0x0002CF8, 0x0002D71, 0x0002D78, 0x0002D7D, 0x0002D88,
    0x0002D9A, 0x0002DC0, 0x0002DC5, 0x0002DCA, 0x0002DE0, 0x0002E0D, 0x0002E10, 0x0002E15,
    0x0002E2C, 0x0002E39, 0x0002E44, 0x0002E49, 0x0002E58, 0x0002E65, 0x0002E6C, 0x0002E71,
    0x0002E74, 0x0002E79, 0x0002E80, 0x0002E8D, 0x0002E94, 0x0002EA1, 0x0002EAC, 0x0002EB9,
    0x0002EE8, 0x0002F41, 0x0002F44, 0x0002F9A, 0x0002FCC, 0x0003015, 0x0003034, 0x0003039,
    0x0003044, 0x0003049, 0x00030A4, 0x00030A9, 0x00030E8, 0x00030F5, 0x00030F8, 0x0003161,
    0x000316C, 0x0003175, 0x0003178, 0x0003181, 0x0003188, 0x000319A, 0x00031C0, 0x00031E2,
    0x00031FC, 0x0003201, 0x0003204, 0x0003215, 0x0003234, 0x0003239, 0x0003244, 0x0003249,
    0x00032A4, 0x00032A9, 0x00032D0, 0x00032D5, 0x00032E8, 0x00032F5, 0x00032F8, 0x0003375,
    0x000337C, 0x0003381, 0x0003388, 0x000339A, 0x00033C0, 0x00033C5, 0x00033CC, 0x0003411,
    0x0003434, 0x0003439, 0x0003444, 0x0003449, 0x00034EC, 0x00034F5, 0x00034F8, 0x0003539,
    0x000353C, 0x0003551, 0x000355C, 0x0003562, 0x000357D, 0x0003588, 0x000359A, 0x00035E4,
    0x00035E9, 0x0003600, 0x0003615, 0x000365C, 0x0003669, 0x00036C8, 0x00036CD, 0x00036F0,
    0x00036F5, 0x00036F8, 0x0003701, 0x000371C, 0x000379A, 0x00037C0, 0x0003805, 0x00038C4,
    0x00038C9, 0x00038D0, 0x0003901, 0x000391C, 0x0003942, 0x0003968, 0x0003A05, 0x0003A0C,
    0x0003A11, 0x0003A14, 0x0003A19, 0x0003A2C, 0x0003A31, 0x0003A90, 0x0003A95, 0x0003A98,
    0x0003A9D, 0x0003AC4, 0x0003AC9, 0x0003AD0, 0x0003AF5, 0x0003AF8, 0x0003B01, 0x0003B14,
    0x0003B19, 0x0003B1C, 0x0003B42, 0x0003B68, 0x0003B71, 0x0003B80, 0x0003C01, 0x0003C04,
    0x0003C82, 0x0003CD0, 0x0003D01, 0x0003D20, 0x0003D25, 0x0003DB4, 0x0003E21, 0x0003E34,
    0x0004001, 0x00040AC, 0x00040FD, 0x0004102, 0x0004128, 0x0004141, 0x0004158, 0x0004169,
    0x0004178, 0x0004185, 0x0004188, 0x0004195, 0x000419C, 0x00041B9, 0x00041C4, 0x00041D5,
    0x0004208, 0x0004239, 0x000423C, 0x0004242, 0x0004268, 0x0004281, 0x0004318, 0x000431D,
    0x0004320, 0x0004335, 0x0004338, 0x0004341, 0x00043EC, 0x00043F1, 0x0004924, 0x0004929,
    0x0004938, 0x0004941, 0x000495C, 0x0004961, 0x0004964, 0x0004969, 0x0004978, 0x0004981,
    0x0004A24, 0x0004A29, 0x0004A38, 0x0004A41, 0x0004AC4, 0x0004AC9, 0x0004AD8, 0x0004AE1,
    0x0004AFC, 0x0004B01, 0x0004B04, 0x0004B09, 0x0004B18, 0x0004B21, 0x0004B5C, 0x0004B61,
    0x0004C44, 0x0004C49, 0x0004C58, 0x0004C61, 0x0004D6C, 0x0004DA6, 0x0004DF4, 0x0004E01,
    0x0004E40, 0x0004E81, 0x0004FD8, 0x0004FE1, 0x0004FF8, 0x0005005, 0x00059B4, 0x00059BD,
    0x0005A00, 0x0005A05, 0x0005A6C, 0x0005A81, 0x0005BAC, 0x0005BBA, 0x0005BC5, 0x0005BE4,
    0x0005C01, 0x0005C48, 0x0005C7D, 0x0005CC8, 0x0005D01, 0x0005D48, 0x0005D81, 0x0005DB4,
    0x0005DB9, 0x0005DC4, 0x0005E01, 0x0005ED0, 0x0005F5D, 0x0005F60, 0x0005F71, 0x0005F74,
    0x0005F82, 0x0005FA8, 0x0005FC2, 0x0005FE8, 0x0006042, 0x0006068, 0x0006081, 0x00061E4,
    0x0006201, 0x0006214, 0x000621D, 0x00062A4, 0x00062A9, 0x00062AC, 0x00062C1, 0x00063D8,
    0x0006401, 0x000647C, 0x000651A, 0x0006541, 0x00065B8, 0x00065C1, 0x00065D4, 0x0006601,
    0x00066B0, 0x00066C1, 0x0006728, 0x0006742, 0x000676C, 0x0006801, 0x000685C, 0x0006881,
    0x0006954, 0x0006A02, 0x0006A28, 0x0006A42, 0x0006A68, 0x0006A9D, 0x0006AA0, 0x0006C15,
    0x0006CD0, 0x0006D15, 0x0006D34, 0x0006D42, 0x0006D68, 0x0006E0D, 0x0006E84, 0x0006EB9,
    0x0006EC2, 0x0006EE9, 0x0006F98, 0x0007001, 0x0007090, 0x0007102, 0x0007128, 0x0007135,
    0x0007142, 0x0007169, 0x00071F8, 0x0007201, 0x0007224, 0x0007241, 0x00072EC, 0x00072F5,
    0x0007300, 0x00073A5, 0x00073B4, 0x00073B9, 0x00073D0, 0x00073D5, 0x00073DC, 0x00073E9,
    0x00073EC, 0x0007401, 0x0007700, 0x0007801, 0x0007C58, 0x0007C61, 0x0007C78, 0x0007C81,
    0x0007D18, 0x0007D21, 0x0007D38, 0x0007D41, 0x0007D60, 0x0007D65, 0x0007D68, 0x0007D6D,
    0x0007D70, 0x0007D75, 0x0007D78, 0x0007D7D, 0x0007DF8, 0x0007E01, 0x0007ED4, 0x0007ED9,
    0x0007EF4, 0x0007EF9, 0x0007EFC, 0x0007F09, 0x0007F14, 0x0007F19, 0x0007F34, 0x0007F41,
    0x0007F50, 0x0007F59, 0x0007F70, 0x0007F81, 0x0007FB4, 0x0007FC9, 0x0007FD4, 0x0007FD9,
    0x0007FF4, 0x00081C2, 0x00081C5, 0x00081C8, 0x00081D2, 0x00081E8, 0x00081FD, 0x0008202,
    0x0008228, 0x0008241, 0x0008274, 0x0008409, 0x000840C, 0x000841D, 0x0008420, 0x0008429,
    0x0008450, 0x0008455, 0x0008458, 0x0008465, 0x0008478, 0x0008491, 0x0008494, 0x0008499,
    0x000849C, 0x00084A1, 0x00084A4, 0x00084A9, 0x00084B8, 0x00084BD, 0x00084E8, 0x00084F1,
    0x0008500, 0x0008515, 0x0008528, 0x0008539, 0x000853C, 0x0008542, 0x000860D, 0x0008616,
    0x0008628, 0x0009182, 0x0009270, 0x00093AA, 0x0009400, 0x0009DDA, 0x0009E50, 0x000B001,
    0x000B394, 0x000B3AD, 0x000B3BC, 0x000B3C9, 0x000B3D0, 0x000B3F6, 0x000B3F8, 0x000B401,
    0x000B498, 0x000B49D, 0x000B4A0, 0x000B4B5, 0x000B4B8, 0x000B4C1, 0x000B5A0, 0x000B5BD,
    0x000B5C0, 0x000B601, 0x000B65C, 0x000B681, 0x000B69C, 0x000B6A1, 0x000B6BC, 0x000B6C1,
    0x000B6DC, 0x000B6E1, 0x000B6FC, 0x000B701, 0x000B71C, 0x000B721, 0x000B73C, 0x000B741,
    0x000B75C, 0x000B761, 0x000B77C, 0x000B8BD, 0x000B8C0, 0x000C015, 0x000C01E, 0x000C020,
    0x000C086, 0x000C0A8, 0x000C0C5, 0x000C0D8, 0x000C0E2, 0x000C0ED, 0x000C0F4, 0x000C105,
    0x000C25C, 0x000C275, 0x000C280, 0x000C285, 0x000C3EC, 0x000C3F1, 0x000C400, 0x000C415,
    0x000C4C0, 0x000C4C5, 0x000C63C, 0x000C64A, 0x000C658, 0x000C681, 0x000C700, 0x000C7C1,
    0x000C800, 0x000C882, 0x000C8A8, 0x000C922, 0x000C940, 0x000C946, 0x000C980, 0x000CA02,
    0x000CA28, 0x000CAC6, 0x000CB00, 0x000D001, 0x0013700, 0x0013801, 0x0029234, 0x0029341,
    0x00293F8, 0x0029401, 0x0029834, 0x0029841, 0x0029882, 0x00298A9, 0x00298B0, 0x0029901,
    0x00299BC, 0x00299FD, 0x0029A78, 0x0029A81, 0x0029B9A, 0x0029BC0, 0x0029C5D, 0x0029C80,
    0x0029C89, 0x0029E24, 0x0029E2D, 0x0029F2C, 0x0029F41, 0x0029F48, 0x0029F4D, 0x0029F50,
    0x0029F55, 0x0029F68, 0x0029FC9, 0x002A008, 0x002A00D, 0x002A018, 0x002A01D, 0x002A02C,
    0x002A031, 0x002A08C, 0x002A0C2, 0x002A0D8, 0x002A101, 0x002A1D0, 0x002A209, 0x002A2D0,
    0x002A342, 0x002A368, 0x002A3C9, 0x002A3E0, 0x002A3ED, 0x002A3F0, 0x002A3F5, 0x002A3FC,
    0x002A402, 0x002A429, 0x002A498, 0x002A4C1, 0x002A51C, 0x002A581, 0x002A5F4, 0x002A611,
    0x002A6CC, 0x002A73D, 0x002A742, 0x002A768, 0x002A781, 0x002A794, 0x002A799, 0x002A7C2,
    0x002A7E9, 0x002A7FC, 0x002A801, 0x002A8A4, 0x002A901, 0x002A90C, 0x002A911, 0x002A930,
    0x002A942, 0x002A968, 0x002A981, 0x002A9DC, 0x002A9E9, 0x002A9EC, 0x002A9F9, 0x002AAC0,
    0x002AAC5, 0x002AAC8, 0x002AAD5, 0x002AADC, 0x002AAE5, 0x002AAF8, 0x002AB01, 0x002AB04,
    0x002AB09, 0x002AB0C, 0x002AB6D, 0x002AB78, 0x002AB81, 0x002ABAC, 0x002ABC9, 0x002ABD4,
    0x002AC05, 0x002AC1C, 0x002AC25, 0x002AC3C, 0x002AC45, 0x002AC5C, 0x002AC81, 0x002AC9C,
    0x002ACA1, 0x002ACBC, 0x002ACC1, 0x002AD6C, 0x002AD71, 0x002ADA8, 0x002ADC1, 0x002AF8C,
    0x002AFC2, 0x002AFE8, 0x002B001, 0x0035E90, 0x0035EC1, 0x0035F1C, 0x0035F2D, 0x0035FF0,
    0x003E401, 0x003E9B8, 0x003E9C1, 0x003EB68, 0x003EC01, 0x003EC1C, 0x003EC4D, 0x003EC60,
    0x003EC75, 0x003EC78, 0x003EC7D, 0x003ECA4, 0x003ECA9, 0x003ECDC, 0x003ECE1, 0x003ECF4,
    0x003ECF9, 0x003ECFC, 0x003ED01, 0x003ED08, 0x003ED0D, 0x003ED14, 0x003ED19, 0x003EEC8,
    0x003EF4D, 0x003F4F8, 0x003F541, 0x003F640, 0x003F649, 0x003F720, 0x003F7C1, 0x003F7F0,
    0x003F9C1, 0x003F9D4, 0x003F9D9, 0x003FBF4, 0x003FC42, 0x003FC68, 0x003FC85, 0x003FCEC,
    0x003FD05, 0x003FD6C, 0x003FD99, 0x003FEFC, 0x003FF09, 0x003FF20, 0x003FF29, 0x003FF40,
    0x003FF49, 0x003FF60, 0x003FF69, 0x003FF74, 0x0040001, 0x0040030, 0x0040035, 0x004009C,
    0x00400A1, 0x00400EC, 0x00400F1, 0x00400F8, 0x00400FD, 0x0040138, 0x0040141, 0x0040178,
    0x0040201, 0x00403EC, 0x004041E, 0x00404D0, 0x0040502, 0x00405E4, 0x004062A, 0x0040630,
    0x0040A01, 0x0040A74, 0x0040A81, 0x0040B44, 0x0040B86, 0x0040BF0, 0x0040C01, 0x0040C82,
    0x0040C90, 0x0040CB5, 0x0040D06, 0x0040D09, 0x0040D2A, 0x0040D2C, 0x0040D41, 0x0040DD8,
    0x0040E01, 0x0040E78, 0x0040E81, 0x0040F10, 0x0040F21, 0x0040F40, 0x0040F46, 0x0040F58,
    0x0041001, 0x0041278, 0x0041282, 0x00412A8, 0x00412C1, 0x0041350, 0x0041361, 0x00413F0,
    0x0041401, 0x00414A0, 0x00414C1, 0x0041590, 0x00415C1, 0x00415EC, 0x00415F1, 0x004162C,
    0x0041631, 0x004164C, 0x0041651, 0x0041658, 0x004165D, 0x0041688, 0x004168D, 0x00416C8,
    0x00416CD, 0x00416E8, 0x00416ED, 0x00416F4, 0x0041801, 0x0041CDC, 0x0041D01, 0x0041D58,
    0x0041D81, 0x0041DA0, 0x0041E01, 0x0041E18, 0x0041E1D, 0x0041EC4, 0x0041EC9, 0x0041EEC,
    0x0042001, 0x0042018, 0x0042021, 0x0042024, 0x0042029, 0x00420D8, 0x00420DD, 0x00420E4,
    0x00420F1, 0x00420F4, 0x00420FD, 0x0042158, 0x0042162, 0x0042181, 0x00421DC, 0x00421E6,
    0x0042201, 0x004227C, 0x004229E, 0x00422C0, 0x0042381, 0x00423CC, 0x00423D1, 0x00423D8,
    0x00423EE, 0x0042401, 0x004245A, 0x0042470, 0x0042481, 0x00424E8, 0x0042601, 0x00426E0,
    0x00426F2, 0x00426F9, 0x0042702, 0x0042740, 0x004274A, 0x0042801, 0x0042804, 0x0042841,
    0x0042850, 0x0042855, 0x0042860, 0x0042865, 0x00428D8, 0x0042902, 0x0042924, 0x0042981,
    0x00429F6, 0x00429FC, 0x0042A01, 0x0042A76, 0x0042A80, 0x0042B01, 0x0042B20, 0x0042B25,
    0x0042B94, 0x0042BAE, 0x0042BC0, 0x0042C01, 0x0042CD8, 0x0042D01, 0x0042D58, 0x0042D62,
    0x0042D81, 0x0042DCC, 0x0042DE2, 0x0042E01, 0x0042E48, 0x0042EA6, 0x0042EC0, 0x0043001,
    0x0043124, 0x0043201, 0x00432CC, 0x0043301, 0x00433CC, 0x00433EA, 0x0043401, 0x0043490,
    0x00434C2, 0x00434E8, 0x0043982, 0x00439FC, 0x0043A01, 0x0043AA8, 0x0043AC1, 0x0043AC8,
    0x0043C01, 0x0043C76, 0x0043C9D, 0x0043CA0, 0x0043CC1, 0x0043D18, 0x0043D46, 0x0043D54,
    0x0043DC1, 0x0043E08, 0x0043EC1, 0x0043F16, 0x0043F30, 0x0043F81, 0x0043FDC, 0x004400D,
    0x00440E0, 0x004414A, 0x00441C0, 0x00441C5, 0x00441CC, 0x00441D5, 0x00441D8, 0x004420D,
    0x00442C0, 0x0044341, 0x00443A4, 0x00443C2, 0x00443E8, 0x004440D, 0x004449C, 0x00444DA,
    0x0044500, 0x0044511, 0x0044514, 0x004451D, 0x0044520, 0x0044541, 0x00445CC, 0x00445D9,
    0x00445DC, 0x004460D, 0x00446CC, 0x0044705, 0x0044714, 0x0044742, 0x0044769, 0x004476C,
    0x0044771, 0x0044774, 0x0044786, 0x00447D4, 0x0044801, 0x0044848, 0x004484D, 0x00448B0,
    0x00448FD, 0x0044904, 0x0044A01, 0x0044A1C, 0x0044A21, 0x0044A24, 0x0044A29, 0x0044A38,
    0x0044A3D, 0x0044A78, 0x0044A7D, 0x0044AA4, 0x0044AC1, 0x0044B7C, 0x0044BC2, 0x0044BE8,
    0x0044C15, 0x0044C34, 0x0044C3D, 0x0044C44, 0x0044C4D, 0x0044CA4, 0x0044CA9, 0x0044CC4,
    0x0044CC9, 0x0044CD0, 0x0044CD5, 0x0044CE8, 0x0044CF5, 0x0044CF8, 0x0044D41, 0x0044D44,
    0x0044D75, 0x0044D88, 0x0045001, 0x00450D4, 0x004511D, 0x004512C, 0x0045142, 0x0045168,
    0x004517D, 0x0045188, 0x0045201, 0x00452C0, 0x0045311, 0x0045318, 0x004531D, 0x0045320,
    0x0045342, 0x0045368, 0x0045601, 0x00456BC, 0x0045761, 0x0045770, 0x0045801, 0x00458C0,
    0x0045911, 0x0045914, 0x0045942, 0x0045968, 0x0045A01, 0x0045AAC, 0x0045AE1, 0x0045AE4,
    0x0045B02, 0x0045B28, 0x0045C01, 0x0045C6C, 0x0045CC2, 0x0045CF0, 0x0045D01, 0x0045D1C,
    0x0046001, 0x00460B0, 0x0046281, 0x0046382, 0x00463CC, 0x00463FD, 0x004641C, 0x0046425,
    0x0046428, 0x0046431, 0x0046450, 0x0046455, 0x004645C, 0x0046461, 0x00464C0, 0x00464FD,
    0x0046500, 0x0046505, 0x0046508, 0x0046542, 0x0046568, 0x0046681, 0x00466A0, 0x00466A9,
    0x0046744, 0x0046785, 0x0046788, 0x004678D, 0x0046790, 0x0046801, 0x0046804, 0x004682D,
    0x00468CC, 0x00468E9, 0x00468EC, 0x0046941, 0x0046944, 0x0046971, 0x0046A28, 0x0046A75,
    0x0046A78, 0x0046AC1, 0x0046BE4, 0x0047001, 0x0047024, 0x0047029, 0x00470BC, 0x0047101,
    0x0047104, 0x0047142, 0x00471B4, 0x00471C9, 0x0047240, 0x0047401, 0x004741C, 0x0047421,
    0x0047428, 0x004742D, 0x00474C4, 0x0047519, 0x004751C, 0x0047542, 0x0047568, 0x0047581,
    0x0047598, 0x004759D, 0x00475A4, 0x00475A9, 0x0047628, 0x0047661, 0x0047664, 0x0047682,
    0x00476A8, 0x0047B81, 0x0047BCC, 0x0047C09, 0x0047C0C, 0x0047C11, 0x0047C44, 0x0047C49,
    0x0047CD0, 0x0047D42, 0x0047D68, 0x0047EC1, 0x0047EC4, 0x0047F02, 0x0047F54, 0x0048001,
    0x0048E68, 0x0049002, 0x00491BC, 0x0049201, 0x0049510, 0x004BE41, 0x004BFC4, 0x004C001,
    0x004D0C0, 0x004D105, 0x004D11C, 0x0051001, 0x005191C, 0x005A001, 0x005A8E4, 0x005A901,
    0x005A97C, 0x005A982, 0x005A9A8, 0x005A9C1, 0x005AAFC, 0x005AB02, 0x005AB28, 0x005AB41,
    0x005ABB8, 0x005AC01, 0x005ACC0, 0x005AD01, 0x005AD10, 0x005AD42, 0x005AD68, 0x005AD6E,
    0x005AD88, 0x005AD8D, 0x005ADE0, 0x005ADF5, 0x005AE40, 0x005B901, 0x005BA02, 0x005BA5C,
    0x005BC01, 0x005BD2C, 0x005BD41, 0x005BD44, 0x005BE4D, 0x005BE80, 0x005BF81, 0x005BF88,
    0x005BF8D, 0x005BF90, 0x005C001, 0x0061FE0, 0x0062001, 0x0063358, 0x0063401, 0x0063424,
    0x006BFC1, 0x006BFD0, 0x006BFD5, 0x006BFF0, 0x006BFF5, 0x006BFFC, 0x006C001, 0x006C48C,
    0x006C4C9, 0x006C4CC, 0x006C541, 0x006C54C, 0x006C555, 0x006C558, 0x006C591, 0x006C5A0,
    0x006C5C1, 0x006CBF0, 0x006F001, 0x006F1AC, 0x006F1C1, 0x006F1F4, 0x006F201, 0x006F224,
    0x006F241, 0x006F268, 0x0074B02, 0x0074B50, 0x0074B82, 0x0074BD0, 0x0074D82, 0x0074DE4,
    0x0075001, 0x0075154, 0x0075159, 0x0075274, 0x0075279, 0x0075280, 0x0075289, 0x007528C,
    0x0075295, 0x007529C, 0x00752A5, 0x00752B4, 0x00752B9, 0x00752E8, 0x00752ED, 0x00752F0,
    0x00752F5, 0x0075310, 0x0075315, 0x0075418, 0x007541D, 0x007542C, 0x0075435, 0x0075454,
    0x0075459, 0x0075474, 0x0075479, 0x00754E8, 0x00754ED, 0x00754FC, 0x0075501, 0x0075514,
    0x0075519, 0x007551C, 0x0075529, 0x0075544, 0x0075549, 0x0075A98, 0x0075AA1, 0x0075B04,
    0x0075B09, 0x0075B6C, 0x0075B71, 0x0075BEC, 0x0075BF1, 0x0075C54, 0x0075C59, 0x0075CD4,
    0x0075CD9, 0x0075D3C, 0x0075D41, 0x0075DBC, 0x0075DC1, 0x0075E24, 0x0075E29, 0x0075EA4,
    0x0075EA9, 0x0075F0C, 0x0075F11, 0x0075F30, 0x0075F3A, 0x0076000, 0x0077C01, 0x0077C7C,
    0x0077C95, 0x0077CAC, 0x00780C1, 0x00781B8, 0x0078401, 0x00784B4, 0x00784DD, 0x00784F8,
    0x0078502, 0x0078528, 0x0078539, 0x007853C, 0x0078A41, 0x0078AB8, 0x0078B01, 0x0078BB0,
    0x0078BC2, 0x0078BE8, 0x0079341, 0x00793B0, 0x00793C2, 0x00793E8, 0x0079F81, 0x0079F9C,
    0x0079FA1, 0x0079FB0, 0x0079FB5, 0x0079FBC, 0x0079FC1, 0x0079FFC, 0x007A001, 0x007A314,
    0x007A31E, 0x007A340, 0x007A401, 0x007A510, 0x007A52D, 0x007A530, 0x007A542, 0x007A568,
    0x007B1C6, 0x007B2B0, 0x007B2B6, 0x007B2C0, 0x007B2C6, 0x007B2D4, 0x007B406, 0x007B4B8,
    0x007B4BE, 0x007B4F8, 0x007B801, 0x007B810, 0x007B815, 0x007B880, 0x007B885, 0x007B88C,
    0x007B891, 0x007B894, 0x007B89D, 0x007B8A0, 0x007B8A5, 0x007B8CC, 0x007B8D1, 0x007B8E0,
    0x007B8E5, 0x007B8E8, 0x007B8ED, 0x007B8F0, 0x007B909, 0x007B90C, 0x007B91D, 0x007B920,
    0x007B925, 0x007B928, 0x007B92D, 0x007B930, 0x007B935, 0x007B940, 0x007B945, 0x007B94C,
    0x007B951, 0x007B954, 0x007B95D, 0x007B960, 0x007B965, 0x007B968, 0x007B96D, 0x007B970,
    0x007B975, 0x007B978, 0x007B97D, 0x007B980, 0x007B985, 0x007B98C, 0x007B991, 0x007B994,
    0x007B99D, 0x007B9AC, 0x007B9B1, 0x007B9CC, 0x007B9D1, 0x007B9E0, 0x007B9E5, 0x007B9F4,
    0x007B9F9, 0x007B9FC, 0x007BA01, 0x007BA28, 0x007BA2D, 0x007BA70, 0x007BA85, 0x007BA90,
    0x007BA95, 0x007BAA8, 0x007BAAD, 0x007BAF0, 0x007C402, 0x007C434, 0x007EFC2, 0x007EFE8,
    0x0080001, 0x00A9B80, 0x00A9C01, 0x00ADCE8, 0x00ADD01, 0x00AE078, 0x00AE081, 0x00B3A88,
    0x00B3AC1, 0x00BAF84, 0x00BAFC1, 0x00BB978, 0x00BE001, 0x00BE878, 0x00C0001, 0x00C4D2C,
    0x00C4D41, 0x00C8EC0,
};
/* whitespace (\s) as llama.cpp defines it: 9 A B C D 20 85 A0 1680 2000 2001 2002 2003 2004 2005 2006 2007 2008 2009 200A 2028 2029 202F 205F 3000 */

enum { UC_OTHER = 0, UC_LETTER = 1, UC_NUMBER = 2, UC_SPACE = 3, UC_NONE = 4 };

static bool uc_is_space(uint32_t c) {
    if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
    if (c < 0x85) return false;
    switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
        return true;
    default:
        return c >= 0x2000 && c <= 0x200A;
    }
}

/* The class of a code point: whitespace first, then \p{L} / \p{N} from the range table.
 * Code points above U+10FFFF are "undefined" in llama.cpp, i.e. other. */
static int uc_class(uint32_t c) {
    if (uc_is_space(c)) return UC_SPACE;
    if (c < 0x80) {
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return UC_LETTER;
        if (c >= '0' && c <= '9') return UC_NUMBER;
        return UC_OTHER;
    }
    if (c > 0x10FFFF) return UC_OTHER;
    size_t lo = 0, hi = sizeof ucat_ranges / sizeof ucat_ranges[0];
    while (hi - lo > 1) { /* last entry with start <= c */
        size_t mid = (lo + hi) / 2;
        if ((ucat_ranges[mid] >> 2) <= c) lo = mid; else hi = mid;
    }
    return (int)(ucat_ranges[lo] & 3);
}

/* unicode_len_utf8: length from the lead byte's high nibble (continuation bytes count 1). */
static size_t utf8_len(unsigned char c) {
    static const unsigned char lk[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lk[c >> 4];
}

/* unicode_cpt_from_utf8 + the U+FFFD fallback of unicode_cpts_from_utf8 (overlong forms and
 * surrogates are accepted as llama.cpp does). */
static uint32_t utf8_decode(const unsigned char *s, size_t n, size_t *pos) {
    size_t i = *pos;
    unsigned char b = s[i];
    if (!(b & 0x80)) { *pos = i + 1; return b; }
    if ((b & 0x40) && !(b & 0x20)) {
        if (i + 1 < n && (s[i + 1] & 0xC0) == 0x80) {
            *pos = i + 2;
            return ((uint32_t)(b & 0x1F) << 6) | (s[i + 1] & 0x3F);
        }
    } else if ((b & 0x40) && !(b & 0x10)) {
        if (i + 2 < n && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80) {
            *pos = i + 3;
            return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
        }
    } else if ((b & 0x40) && !(b & 0x08)) {
        if (i + 3 < n && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80 &&
            (s[i + 3] & 0xC0) == 0x80) {
            *pos = i + 4;
            return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
                   ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
        }
    }
    *pos = i + 1;
    return 0xFFFD;
}

/* unicode_cpt_to_utf8. llama.cpp throws for code points above U+10FFFF (reachable from bytes
 * F5..F7); we write U+FFFD instead. Returns the byte count. */
static int utf8_encode(uint32_t c, unsigned char *o) {
    if (c <= 0x7F) { o[0] = (unsigned char)c; return 1; }
    if (c <= 0x7FF) { o[0] = (unsigned char)(0xC0 | (c >> 6)); o[1] = (unsigned char)(0x80 | (c & 0x3F)); return 2; }
    if (c > 0x10FFFF) c = 0xFFFD;
    if (c <= 0xFFFF) {
        o[0] = (unsigned char)(0xE0 | (c >> 12));
        o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (c >> 18));
    o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

/* GPT-2 bytes_to_unicode: printable bytes map to themselves, the other 68 to U+0100.. */
static uint32_t gpt2_byte_cpt(unsigned b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    unsigned n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE))) n++;
    return 256 + n;
}

/* Inverse: the byte of a code point, or -1. */
static int gpt2_cpt_byte(uint32_t c) {
    if ((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) return (int)c;
    if (c < 256 || c >= 256 + 68) return -1;
    unsigned n = 0;
    for (unsigned b = 0; b < 256; b++) {
        if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE))) {
            if (256 + n == c) return (int)b;
            n++;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* The vocabulary                                                                              */

typedef struct merge_ent {
    uint64_t off;        /* into mtext: left bytes then right bytes */
    uint32_t llen, rlen;
    uint32_t hash;
    int32_t rank;
} merge_ent;

struct iqf_vocab {
    iqf_vocab_type type;
    int32_t n_tokens;
    char *text;          /* token strings */
    uint64_t *tok_off;
    uint32_t *tok_len;
    uint32_t *tok_hash;
    float *scores;
    uint32_t *attr;
    uint32_t max_tok_len;
    uint32_t max_mleft, max_mright; /* longest merge sides */
    uint32_t hmask;      /* token hash table: hmask+1 slots of ids (-1 empty) */
    int32_t *htab;

    char *mtext;
    merge_ent *merges;
    int64_t n_merges;
    uint32_t mmask;
    int32_t *mtab;       /* indexes into merges */

    char *piece;         /* token_to_piece(special=true) of every token */
    uint64_t *piece_off;
    uint32_t *piece_len;

    int32_t bos, eos, eot, eom, unk, pad, sep, linefeed;
    bool add_bos, add_eos, add_space_prefix, clean_spaces;
    bool spm_split;      /* no token has U+2581 after a non-U+2581 byte (see spm_tokenize) */
    int32_t byte_tok[256];     /* SPM byte fallback (<0xXX>, else the 1-byte string) */
    int32_t raw_byte_tok[256]; /* BPE: the 1-byte string */
    unsigned char bmap[256][2]; /* BPE: UTF-8 of gpt2_byte_cpt(b) */
    unsigned char bmap_len[256];

    int32_t *special;    /* control / user-defined / unknown ids, longest text first */
    int32_t n_special;
    int32_t *eog;
    int32_t n_eog;
};

static uint32_t hash_bytes(uint32_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}
#define HASH_SEED 2166136261u

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(err, errlen, "tokenizer: ");
    if (n < 0 || (size_t)n >= errlen) n = 0;
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

int32_t iqf_vocab_find(const iqf_vocab *v, const char *s, size_t n) {
    if (!v || (!s && n)) return IQF_TOKEN_NULL;
    uint32_t h = hash_bytes(HASH_SEED, (const unsigned char *)s, n);
    for (uint32_t i = h & v->hmask;; i = (i + 1) & v->hmask) {
        int32_t id = v->htab[i];
        if (id < 0) return IQF_TOKEN_NULL;
        if (v->tok_hash[id] == h && v->tok_len[id] == n && memcmp(v->text + v->tok_off[id], s, n) == 0)
            return id;
    }
}

static int32_t merge_rank(const iqf_vocab *v, const char *l, size_t ln, const char *r, size_t rn) {
    if (!v->mtab || ln > v->max_mleft || rn > v->max_mright) return -1;
    uint32_t h = hash_bytes(hash_bytes(HASH_SEED, (const unsigned char *)l, ln) ^ 0x9E3779B9u,
                            (const unsigned char *)r, rn);
    for (uint32_t i = h & v->mmask;; i = (i + 1) & v->mmask) {
        int32_t k = v->mtab[i];
        if (k < 0) return -1;
        const merge_ent *m = &v->merges[k];
        if (m->hash == h && m->llen == ln && m->rlen == rn &&
            memcmp(v->mtext + m->off, l, ln) == 0 && memcmp(v->mtext + m->off + ln, r, rn) == 0)
            return m->rank;
    }
}

iqf_vocab_arrays iqf_vocab_arrays_init(void) {
    iqf_vocab_arrays a;
    memset(&a, 0, sizeof a);
    a.bos_id = a.eos_id = a.unk_id = a.eot_id = a.eom_id = a.pad_id = a.sep_id = IQF_VOCAB_ID_UNSET;
    a.add_bos = a.add_eos = a.add_space_prefix = -1;
    return a;
}

void iqf_vocab_free(iqf_vocab *v) {
    if (!v) return;
    free(v->text); free(v->tok_off); free(v->tok_len); free(v->tok_hash); free(v->scores);
    free(v->attr); free(v->htab); free(v->mtext); free(v->merges); free(v->mtab);
    free(v->piece); free(v->piece_off); free(v->piece_len); free(v->special); free(v->eog);
    free(v);
}

static bool tok_is(const iqf_vocab *v, int32_t id, const char *s) {
    size_t n = strlen(s);
    return v->tok_len[id] == n && memcmp(v->text + v->tok_off[id], s, n) == 0;
}

static bool tok_in(const iqf_vocab *v, int32_t id, const char *const *list) {
    for (; *list; list++)
        if (tok_is(v, id, *list)) return true;
    return false;
}

/* llama.cpp's token_to_piece for the cache (special = true), appended to a growing buffer. */
typedef struct sbuf { char *p; size_t n, cap; bool oom; } sbuf;

static void sb_put(sbuf *b, const void *s, size_t n) {
    if (b->oom || n == 0) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* token_to_byte: strtol of text[3..5) in base 16 (what llama.cpp does; junk gives 0 or a
 * partial value). */
static unsigned char token_byte(const char *t, size_t n) {
    unsigned v = 0;
    if (n < 4) return 0;
    size_t i = 3, end = n < 5 ? n : 5;
    for (; i < end; i++) {
        int h = hexval(t[i]);
        if (h < 0) break;
        v = v * 16 + (unsigned)h;
    }
    return (unsigned char)v;
}

static void build_piece(const iqf_vocab *v, int32_t id, sbuf *b) {
    const size_t start = b->n;
    const char *t = v->text + v->tok_off[id];
    size_t n = v->tok_len[id];
    uint32_t a = v->attr[id];
    if (a & (IQF_TOKATTR_UNKNOWN | IQF_TOKATTR_CONTROL | IQF_TOKATTR_USER_DEFINED)) {
        sb_put(b, t, n);
    } else if (a & IQF_TOKATTR_NORMAL) {
        if (v->type == IQF_VOCAB_SPM) {
            for (size_t i = 0; i < n;) {
                if (i + 3 <= n && memcmp(t + i, "\xe2\x96\x81", 3) == 0) { sb_put(b, " ", 1); i += 3; }
                else { sb_put(b, t + i, 1); i++; }
            }
        } else { /* llama_decode_text */
            for (size_t i = 0; i < n;) {
                uint32_t c = utf8_decode((const unsigned char *)t, n, &i);
                int byte = gpt2_cpt_byte(c);
                if (byte >= 0) {
                    unsigned char ch = (unsigned char)byte;
                    sb_put(b, &ch, 1);
                } else {
                    unsigned char u[4];
                    int k = utf8_encode(c, u);
                    char hx[8];
                    sb_put(b, "[UNK_BYTE_0x", 12);
                    for (int j = 0; j < k; j++) {
                        snprintf(hx, sizeof hx, "%02x", u[j]);
                        sb_put(b, hx, 2);
                    }
                    /* llama.cpp appends the whole token text for every such code point, which
                     * is quadratic in the token length; we stop copying it past 64 KiB. */
                    if (b->n - start + n <= 65536) sb_put(b, t, n);
                    sb_put(b, "]", 1);
                }
            }
        }
    } else if (a & IQF_TOKATTR_BYTE) {
        unsigned char ch = token_byte(t, n);
        sb_put(b, &ch, 1);
    }
}

/* qsort without a context argument: sort (len, id) pairs instead. */
typedef struct spec_key { uint32_t len; int32_t id; } spec_key;
static int cmp_spec_key(const void *pa, const void *pb) {
    const spec_key *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static uint32_t pow2_at_least(uint64_t n) {
    uint64_t c = 16;
    while (c < n) c <<= 1;
    return (uint32_t)c;
}

static void lower_ascii(char *s) {
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
}

/* The tokenizer.ggml.pre values llama.cpp tokenizes with the GPT-2 regex. */
static const char *const gpt2_pres[] = {
    "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
    "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt",
    "olmo", "jais", "trillion", "granite-docling", NULL,
};

static int32_t tokenize_impl(const iqf_vocab *v, const char *text, size_t len, bool add_special,
                             bool parse_special, int32_t *out, int32_t max_out);

/* The vocabulary builder's stages, in order; each returns VB_OK, VB_OOM, or VB_ERR with err set. */
typedef enum { VB_OK = 0, VB_OOM, VB_ERR } vb_status;

/* Stage 1: the arrays are complete and consistent; the model's type and space cleaning. */
static vb_status vb_check_arrays(const iqf_vocab_arrays *a, iqf_vocab_type *type, bool *clean_spaces, char *err, size_t errlen) {
    if (!a || !a->model) { set_err(err, errlen, "no tokenizer.ggml.model"); return VB_ERR; }
    *clean_spaces = false;
    if (strcmp(a->model, "llama") == 0) {
        *type = IQF_VOCAB_SPM;
    } else if (strcmp(a->model, "gpt2") == 0) {
        *type = IQF_VOCAB_BPE;
        const char *pre = a->pre ? a->pre : "";
        bool ok = false;
        for (const char *const *p = gpt2_pres; *p; p++)
            if (strcmp(pre, *p) == 0) ok = true;
        if (!ok) {
            set_err(err, errlen, "unsupported tokenizer.ggml.pre '%s' (supported: the GPT-2 regex family, e.g. 'gpt-2')",
                    a->pre ? a->pre : "(missing)");
            return VB_ERR;
        }
        *clean_spaces = !(strcmp(pre, "trillion") == 0 || strcmp(pre, "granite-docling") == 0);
    } else {
        set_err(err, errlen, "unsupported tokenizer.ggml.model '%s' (supported: llama, gpt2)", a->model);
        return VB_ERR;
    }
    if (a->n_tokens <= 0 || a->n_tokens > INT32_MAX / 2 || !a->tokens) {
        set_err(err, errlen, "tokenizer.ggml.tokens: %lld tokens", (long long)a->n_tokens);
        return VB_ERR;
    }
    if (a->scores && a->n_scores != a->n_tokens) {
        set_err(err, errlen, "tokenizer.ggml.scores has %lld values for %lld tokens",
                (long long)a->n_scores, (long long)a->n_tokens);
        return VB_ERR;
    }
    if (a->token_types && a->n_token_types != a->n_tokens) {
        set_err(err, errlen, "tokenizer.ggml.token_type has %lld values for %lld tokens",
                (long long)a->n_token_types, (long long)a->n_tokens);
        return VB_ERR;
    }
    if (*type == IQF_VOCAB_BPE && (!a->merges || a->n_merges < 0)) {
        if (!(a->n_merges == 0 && !a->merges)) {
            set_err(err, errlen, "tokenizer.ggml.merges: bad array");
            return VB_ERR;
        }
    }
    if (*type == IQF_VOCAB_BPE && a->n_merges > INT32_MAX / 2) {
        set_err(err, errlen, "tokenizer.ggml.merges: %lld merges", (long long)a->n_merges);
        return VB_ERR;
    }

    return VB_OK;
}

/* Stage 2: token strings, the string -> id table, scores and attributes. */
static vb_status vb_load_tokens(iqf_vocab *v, const iqf_vocab_arrays *a, char *err, size_t errlen) {
    const int32_t n = v->n_tokens;
    /* token strings (empty ones become "[EMPTY_<i>]" as in llama.cpp) */
    {
        sbuf b = { 0 };
        for (int32_t i = 0; i < n; i++) {
            const char *s = a->tokens[i];
            uint64_t l = a->token_lens ? a->token_lens[i] : (s ? strlen(s) : 0);
            if (!s && l) { free(b.p); set_err(err, errlen, "token %d: NULL string", i); return VB_ERR; }
            if (l > UINT32_MAX / 2) { free(b.p); set_err(err, errlen, "token %d: %llu bytes", i, (unsigned long long)l); return VB_ERR; }
            char tmp[32];
            if (l == 0) {
                snprintf(tmp, sizeof tmp, "[EMPTY_%d]", i);
                s = tmp;
                l = strlen(tmp);
            }
            v->tok_off[i] = b.n;
            v->tok_len[i] = (uint32_t)l;
            if ((uint32_t)l > v->max_tok_len) v->max_tok_len = (uint32_t)l;
            sb_put(&b, s, (size_t)l);
            v->tok_hash[i] = hash_bytes(HASH_SEED, (const unsigned char *)s, (size_t)l);
        }
        if (b.oom) { free(b.p); return VB_OOM; }
        v->text = b.p ? b.p : malloc(1);
        if (!v->text) return VB_OOM;
    }
    /* string -> id; a repeated string maps to its last id (token_to_id[word] = i) */
    v->hmask = pow2_at_least((uint64_t)n * 2) - 1;
    v->htab = malloc(sizeof(int32_t) * ((size_t)v->hmask + 1));
    if (!v->htab) return VB_OOM;
    memset(v->htab, 0xFF, sizeof(int32_t) * ((size_t)v->hmask + 1));
    for (int32_t i = 0; i < n; i++) {
        uint32_t h = v->tok_hash[i];
        for (uint32_t k = h & v->hmask;; k = (k + 1) & v->hmask) {
            int32_t id = v->htab[k];
            if (id < 0) { v->htab[k] = i; break; }
            if (v->tok_hash[id] == h && v->tok_len[id] == v->tok_len[i] &&
                memcmp(v->text + v->tok_off[id], v->text + v->tok_off[i], v->tok_len[i]) == 0) {
                v->htab[k] = i;
                break;
            }
        }
    }
    for (int32_t i = 0; i < n; i++) {
        v->scores[i] = a->scores ? a->scores[i] : 0.0f;
        uint32_t at = IQF_TOKATTR_NORMAL;
        if (a->token_types) {
            switch (a->token_types[i]) {
            case IQF_TOKTYPE_UNKNOWN: at = IQF_TOKATTR_UNKNOWN; break;
            case IQF_TOKTYPE_UNUSED: at = IQF_TOKATTR_UNUSED; break;
            case IQF_TOKTYPE_NORMAL: at = IQF_TOKATTR_NORMAL; break;
            case IQF_TOKTYPE_CONTROL: at = IQF_TOKATTR_CONTROL; break;
            case IQF_TOKTYPE_USER_DEFINED: at = IQF_TOKATTR_USER_DEFINED; break;
            case IQF_TOKTYPE_BYTE: at = IQF_TOKATTR_BYTE; break;
            default: at = 0; break;
            }
        }
        v->attr[i] = at;
    }

    return VB_OK;
}

/* Stage 3 (BPE): the merge table. */
static vb_status vb_load_merges(iqf_vocab *v, const iqf_vocab_arrays *a, char *err, size_t errlen) {
    /* merges: "left right" split at the first ' ' from index 1; a repeated pair keeps its first
     * rank (bpe_ranks.emplace); no space: the pair ("", "") */
    if (v->type == IQF_VOCAB_BPE && a->n_merges > 0) {
        int64_t nm = a->n_merges;
        v->n_merges = nm;
        v->merges = malloc(sizeof(merge_ent) * (size_t)nm);
        v->mmask = pow2_at_least((uint64_t)nm * 2) - 1;
        v->mtab = malloc(sizeof(int32_t) * ((size_t)v->mmask + 1));
        if (!v->merges || !v->mtab) return VB_OOM;
        memset(v->mtab, 0xFF, sizeof(int32_t) * ((size_t)v->mmask + 1));
        sbuf b = { 0 };
        for (int64_t i = 0; i < nm; i++) {
            const char *s = a->merges[i];
            uint64_t l = a->merge_lens ? a->merge_lens[i] : (s ? strlen(s) : 0);
            if ((!s && l) || l > UINT32_MAX / 2) {
                free(b.p);
                set_err(err, errlen, "merge %lld: bad string", (long long)i);
                return VB_ERR;
            }
            size_t sp = (size_t)l;
            for (size_t j = 1; j < (size_t)l; j++)
                if (s[j] == ' ') { sp = j; break; }
            merge_ent *m = &v->merges[i];
            m->off = b.n;
            m->rank = (int32_t)i;
            if (sp < (size_t)l) {
                m->llen = (uint32_t)sp;
                m->rlen = (uint32_t)(l - sp - 1);
                if (m->llen > v->max_mleft) v->max_mleft = m->llen;
                if (m->rlen > v->max_mright) v->max_mright = m->rlen;
                sb_put(&b, s, sp);
                sb_put(&b, s + sp + 1, m->rlen);
            } else {
                m->llen = m->rlen = 0;
            }
        }
        if (b.oom) { free(b.p); return VB_OOM; }
        v->mtext = b.p ? b.p : malloc(1);
        if (!v->mtext) return VB_OOM;
        for (int64_t i = 0; i < nm; i++) {
            merge_ent *m = &v->merges[i];
            const unsigned char *p = (const unsigned char *)v->mtext + m->off;
            m->hash = hash_bytes(hash_bytes(HASH_SEED, p, m->llen) ^ 0x9E3779B9u, p + m->llen, m->rlen);
            for (uint32_t k = m->hash & v->mmask;; k = (k + 1) & v->mmask) {
                int32_t o = v->mtab[k];
                if (o < 0) { v->mtab[k] = (int32_t)i; break; }
                const merge_ent *q = &v->merges[o];
                if (q->hash == m->hash && q->llen == m->llen && q->rlen == m->rlen &&
                    memcmp(v->mtext + q->off, p, (size_t)m->llen + m->rlen) == 0)
                    break; /* keep the first */
            }
        }
    }

    return VB_OK;
}

/* Stage 4: special ids and add-BOS/EOS flags: the type's defaults, then the file's values. */
static void vb_special_ids(iqf_vocab *v, const iqf_vocab_arrays *a) {
    const int32_t n = v->n_tokens;
    /* flags and special ids (llama_vocab::impl::load) */
    if (v->type == IQF_VOCAB_SPM) {
        v->bos = 1; v->eos = 2; v->unk = 0;
        v->add_space_prefix = true;
        v->add_bos = true;
    } else {
        v->bos = 11; v->eos = 11; v->unk = IQF_TOKEN_NULL;
        v->add_space_prefix = false;
        v->add_bos = false;
    }
    v->eot = v->eom = v->pad = v->sep = IQF_TOKEN_NULL;
    v->add_eos = false;
    if (a->add_space_prefix >= 0) v->add_space_prefix = a->add_space_prefix != 0;
    {
        int32_t *ids[] = { &v->bos, &v->eos, &v->eot, &v->eom, &v->unk, &v->sep, &v->pad };
        const int64_t given[] = { a->bos_id, a->eos_id, a->eot_id, a->eom_id, a->unk_id, a->sep_id, a->pad_id };
        for (int k = 0; k < 7; k++) {
            if (*ids[k] >= n) *ids[k] = IQF_TOKEN_NULL;
            if (given[k] != IQF_VOCAB_ID_UNSET && given[k] >= 0 && given[k] < n) *ids[k] = (int32_t)given[k];
        }
    }
    if (a->add_bos >= 0) v->add_bos = a->add_bos != 0;
    if (a->add_eos >= 0) v->add_eos = a->add_eos != 0;

}

/* Stage 5: special tokens found by their text (EOT, EOM, FIM, end of generation), as llama.cpp does. */
static vb_status vb_detect_special(iqf_vocab *v) {
    const int32_t n = v->n_tokens;
    /* auto-detected special tokens (by text), as llama.cpp does */
    {
        static const char *const eot_names[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
            "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
            "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>", NULL };
        static const char *const eom_names[] = { "<|eom_id|>", NULL };
        static const char *const fim_pre[] = { "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL };
        static const char *const fim_suf[] = { "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
            "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL };
        static const char *const fim_mid[] = { "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL };
        static const char *const fim_pad[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL };
        static const char *const fim_rep[] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL };
        static const char *const fim_sep[] = { "<|file_sep|>", NULL };
        static const char *const eog_names[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>",
            "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>",
            "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
            "<turn|>", "<|tool_response>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
            "[e~[", NULL };
        static const char *const *const lists[8] = { eot_names, eom_names, fim_pre, fim_suf, fim_mid,
                                                      fim_pad, fim_rep, fim_sep };
        int32_t found[8];
        found[0] = v->eot;
        found[1] = v->eom;
        for (int k = 2; k < 8; k++) found[k] = IQF_TOKEN_NULL;
        for (int k = 0; k < 8; k++) {
            if (found[k] != IQF_TOKEN_NULL) continue;
            for (int32_t i = 0; i < n; i++) {
                if (tok_in(v, i, lists[k]) && iqf_vocab_find(v, v->text + v->tok_off[i], v->tok_len[i]) == i) {
                    found[k] = i;
                    v->attr[i] |= IQF_TOKATTR_CONTROL;
                    break;
                }
            }
        }
        v->eot = found[0];
        v->eom = found[1];
        /* control tokens whose text says "unused" */
        for (int32_t i = 0; i < n; i++) {
            if (!(v->attr[i] & IQF_TOKATTR_CONTROL)) continue;
            const char *t = v->text + v->tok_off[i];
            size_t l = v->tok_len[i];
            for (size_t j = 0; j + 6 <= l; j++)
                if (memcmp(t + j, "unused", 6) == 0) { v->attr[i] |= IQF_TOKATTR_UNUSED; break; }
        }
        /* end-of-generation set */
        v->eog = malloc(sizeof(int32_t) * ((size_t)n + 8));
        if (!v->eog) return VB_OOM;
        int32_t ne = 0;
        for (int k = 5; k < 8; k++) if (found[k] != IQF_TOKEN_NULL) v->eog[ne++] = found[k];
        for (int32_t i = 0; i < n; i++) {
            if (tok_in(v, i, eog_names) && iqf_vocab_find(v, v->text + v->tok_off[i], v->tok_len[i]) == i) {
                v->eog[ne++] = i;
                v->attr[i] |= IQF_TOKATTR_CONTROL;
            }
        }
        /* gpt-oss: always rendered */
        static const char *const oss[] = { "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL };
        for (int32_t i = 0; i < n; i++)
            if (tok_in(v, i, oss) && iqf_vocab_find(v, v->text + v->tok_off[i], v->tok_len[i]) == i)
                v->attr[i] = IQF_TOKATTR_USER_DEFINED;
        if (v->eos != IQF_TOKEN_NULL) v->eog[ne++] = v->eos;
        if (v->eot != IQF_TOKEN_NULL) v->eog[ne++] = v->eot;
        if (v->eom != IQF_TOKEN_NULL) v->eog[ne++] = v->eom;
        v->n_eog = ne;
    }

    return VB_OK;
}

/* Stage 6: the special-token cache (longest first) and the token -> piece cache. */
static vb_status vb_caches(iqf_vocab *v) {
    const int32_t n = v->n_tokens;
    /* special tokens cache: control / user-defined / unknown, longest first */
    {
        spec_key *keys = malloc(sizeof(spec_key) * (size_t)n);
        if (!keys) return VB_OOM;
        int32_t ns = 0;
        for (int32_t i = 0; i < n; i++)
            if (v->attr[i] & (IQF_TOKATTR_CONTROL | IQF_TOKATTR_USER_DEFINED | IQF_TOKATTR_UNKNOWN))
                keys[ns++] = (spec_key){ v->tok_len[i], i };
        qsort(keys, (size_t)ns, sizeof *keys, cmp_spec_key);
        v->special = malloc(sizeof(int32_t) * ((size_t)ns + 1));
        if (!v->special) { free(keys); return VB_OOM; }
        for (int32_t i = 0; i < ns; i++) v->special[i] = keys[i].id;
        v->n_special = ns;
        free(keys);
    }

    /* token -> piece cache (special = true) */
    {
        sbuf b = { 0 };
        v->piece_off = malloc(sizeof(uint64_t) * (size_t)n);
        v->piece_len = malloc(sizeof(uint32_t) * (size_t)n);
        if (!v->piece_off || !v->piece_len) return VB_OOM;
        for (int32_t i = 0; i < n; i++) {
            size_t before = b.n;
            v->piece_off[i] = before;
            build_piece(v, i, &b);
            v->piece_len[i] = (uint32_t)(b.n - before);
        }
        if (b.oom) { free(b.p); return VB_OOM; }
        v->piece = b.p ? b.p : malloc(1);
        if (!v->piece) return VB_OOM;
    }

    return VB_OK;
}

/* Stage 7: per-model quirks, byte tables, SPM splitting and the newline token. */
static void vb_finish(iqf_vocab *v, const iqf_vocab_arrays *a) {
    /* per-model attributes: phi-3 strips spaces right of its special tokens */
    if (a->name) {
        char lname[256];
        snprintf(lname, sizeof lname, "%s", a->name);
        lower_ascii(lname);
        if (strstr(lname, "phi-3") || strstr(lname, "phi3")) {
            for (int32_t i = 0; i < v->n_special; i++) v->attr[v->special[i]] |= IQF_TOKATTR_RSTRIP;
            int32_t id = iqf_vocab_find(v, "</s>", 4);
            if (id >= 0) v->attr[id] |= IQF_TOKATTR_RSTRIP;
            static const char *const keep[] = { "<unk>", "<s>", "<|endoftext|>" };
            for (int k = 0; k < 3; k++) {
                id = iqf_vocab_find(v, keep[k], strlen(keep[k]));
                if (id >= 0) v->attr[id] &= ~(uint32_t)IQF_TOKATTR_RSTRIP;
            }
        }
    }

    /* byte tables */
    for (int c = 0; c < 256; c++) {
        static const char hex[] = "0123456789ABCDEF";
        char buf[6] = { '<', '0', 'x', hex[c >> 4], hex[c & 15], '>' };
        char one = (char)c;
        int32_t raw = iqf_vocab_find(v, &one, 1);
        int32_t id = iqf_vocab_find(v, buf, 6);
        v->byte_tok[c] = id >= 0 ? id : raw;
        v->raw_byte_tok[c] = raw;
        unsigned char u[4];
        v->bmap_len[c] = (unsigned char)utf8_encode(gpt2_byte_cpt((unsigned)c), u);
        memcpy(v->bmap[c], u, v->bmap_len[c]);
    }

    /* may SPM cut the text before U+2581 runs? */
    v->spm_split = true;
    for (int32_t i = 0; i < v->n_tokens && v->spm_split; i++) {
        const unsigned char *t = (const unsigned char *)v->text + v->tok_off[i];
        uint32_t l = v->tok_len[i];
        for (uint32_t p = 1; p + 3 <= l; p++) {
            if (t[p] == 0xE2 && t[p + 1] == 0x96 && t[p + 2] == 0x81 &&
                !(p >= 3 && t[p - 3] == 0xE2 && t[p - 2] == 0x96 && t[p - 1] == 0x81)) {
                v->spm_split = false;
                break;
            }
        }
    }

    /* newline token */
    if (v->type == IQF_VOCAB_SPM) {
        v->linefeed = v->byte_tok['\n'] >= 0 ? v->byte_tok['\n'] : v->pad;
    } else {
        int32_t t[8];
        int32_t k = tokenize_impl(v, "\n", 1, false, false, t, 8);
        v->linefeed = k > 0 ? t[0] : v->pad;
    }

}

iqf_vocab *iqf_vocab_from_arrays(const iqf_vocab_arrays *a, char *err, size_t errlen) {
    iqf_vocab_type type;
    bool clean_spaces;
    if (vb_check_arrays(a, &type, &clean_spaces, err, errlen)) return NULL;
    iqf_vocab *v = calloc(1, sizeof *v);
    if (!v) goto oom;
    const int32_t n = (int32_t)a->n_tokens;
    v->type = type;
    v->n_tokens = n;
    v->clean_spaces = clean_spaces;
    v->tok_off = malloc(sizeof(uint64_t) * (size_t)n);
    v->tok_len = malloc(sizeof(uint32_t) * (size_t)n);
    v->tok_hash = malloc(sizeof(uint32_t) * (size_t)n);
    v->scores = malloc(sizeof(float) * (size_t)n);
    v->attr = malloc(sizeof(uint32_t) * (size_t)n);
    if (!v->tok_off || !v->tok_len || !v->tok_hash || !v->scores || !v->attr) goto oom;

    vb_status st = vb_load_tokens(v, a, err, errlen);
    if (!st) st = vb_load_merges(v, a, err, errlen);
    if (!st) {
        vb_special_ids(v, a);
        st = vb_detect_special(v);
    }
    if (!st) st = vb_caches(v);
    if (st == VB_ERR) {
        iqf_vocab_free(v);
        return NULL;
    }
    if (st) goto oom;
    vb_finish(v, a);
    return v;

oom:
    iqf_vocab_free(v);
    set_err(err, errlen, "out of memory");
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Accessors                                                                                   */

iqf_vocab_type iqf_vocab_get_type(const iqf_vocab *v) { return v ? v->type : (iqf_vocab_type)0; }
int32_t iqf_vocab_n_tokens(const iqf_vocab *v) { return v ? v->n_tokens : 0; }
int32_t iqf_vocab_bos(const iqf_vocab *v) { return v ? v->bos : IQF_TOKEN_NULL; }
int32_t iqf_vocab_eos(const iqf_vocab *v) { return v ? v->eos : IQF_TOKEN_NULL; }
int32_t iqf_vocab_eot(const iqf_vocab *v) { return v ? v->eot : IQF_TOKEN_NULL; }
int32_t iqf_vocab_unk(const iqf_vocab *v) { return v ? v->unk : IQF_TOKEN_NULL; }
int32_t iqf_vocab_pad(const iqf_vocab *v) { return v ? v->pad : IQF_TOKEN_NULL; }
int32_t iqf_vocab_newline(const iqf_vocab *v) { return v ? v->linefeed : IQF_TOKEN_NULL; }
bool iqf_vocab_add_bos(const iqf_vocab *v) { return v && v->add_bos && v->bos != IQF_TOKEN_NULL; }
bool iqf_vocab_add_eos(const iqf_vocab *v) { return v && v->add_eos && v->eos != IQF_TOKEN_NULL; }

bool iqf_vocab_is_eog(const iqf_vocab *v, int32_t id) {
    if (!v || id < 0) return false;
    for (int32_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return true;
    return false;
}

uint32_t iqf_vocab_token_attr(const iqf_vocab *v, int32_t id) {
    return (v && id >= 0 && id < v->n_tokens) ? v->attr[id] : 0;
}

float iqf_vocab_token_score(const iqf_vocab *v, int32_t id) {
    return (v && id >= 0 && id < v->n_tokens) ? v->scores[id] : 0.0f;
}

const char *iqf_vocab_token_text(const iqf_vocab *v, int32_t id, size_t *len) {
    if (!v || id < 0 || id >= v->n_tokens) { if (len) *len = 0; return NULL; }
    if (len) *len = v->tok_len[id];
    return v->text + v->tok_off[id];
}

/* ------------------------------------------------------------------------------------------ */
/* Tokenizing                                                                                  */

typedef struct ibuf { int32_t *p; size_t n, cap; bool oom; } ibuf;

static void ib_push(ibuf *b, int32_t x) {
    if (b->oom) return;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        int32_t *p = realloc(b->p, cap * sizeof *p);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    b->p[b->n++] = x;
}

typedef struct sym { int32_t prev, next; uint32_t off, n; } sym;

/* One heap for both tokenizers: SPM pops the highest score, BPE the lowest rank (stored as
 * -rank); ties: the lower left index first. */
typedef struct bigram { double key; int32_t left, right; uint32_t size; } bigram;

typedef struct heap { bigram *p; size_t n, cap; bool oom; } heap;

static bool bg_before(const bigram *a, const bigram *b) {
    return a->key > b->key || (a->key == b->key && a->left < b->left);
}

static void heap_push(heap *h, bigram g) {
    if (h->oom) return;
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        bigram *p = realloc(h->p, cap * sizeof *p);
        if (!p) { h->oom = true; return; }
        h->p = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!bg_before(&g, &h->p[up])) break;
        h->p[i] = h->p[up];
        i = up;
    }
    h->p[i] = g;
}

static bigram heap_pop(heap *h) {
    bigram top = h->p[0];
    bigram last = h->p[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bg_before(&h->p[c + 1], &h->p[c])) c++;
        if (!bg_before(&h->p[c], &last)) break;
        h->p[i] = h->p[c];
        i = c;
    }
    if (n) h->p[i] = last;
    return top;
}

/* Per-call cache word bytes -> token ids. A word's tokens depend on its bytes only (SPM: a
 * chunk cut before a U+2581 run; BPE: a pre-tokenized word), and running text repeats words,
 * so most words are merged once per call. */
typedef struct wslot { uint32_t hash, key_off, key_len, val_off, val_len; } wslot;
typedef struct wcache {
    wslot *slots;        /* key_len == UINT32_MAX: empty */
    uint32_t mask, n;
    unsigned char *keys; size_t nkeys, capkeys;
    int32_t *vals; size_t nvals, capvals;
} wcache;
#define WC_MAX_KEY 128
#define WC_MAX_ENTRIES (1u << 16)

typedef struct scratch {
    sym *s; size_t ns, cap;
    heap h;
    unsigned char *buf; size_t nbuf, capbuf;
    uint32_t *cpt; size_t capcpt;
    wcache wc;
    bool oom;
} scratch;

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* The cached ids of a word, or NULL (then *h is the hash to pass to wc_put). */
static const int32_t *wc_get(const wcache *c, const unsigned char *k, size_t n, uint32_t *h, uint32_t *nv) {
    *h = hash_bytes(HASH_SEED, k, n);
    if (!c->slots) return NULL;
    for (uint32_t i = *h & c->mask;; i = (i + 1) & c->mask) {
        const wslot *e = &c->slots[i];
        if (e->key_len == UINT32_MAX) return NULL;
        if (e->hash == *h && e->key_len == n && memcmp(c->keys + e->key_off, k, n) == 0) {
            *nv = e->val_len;
            return c->vals + e->val_off;
        }
    }
}

static void wc_put(wcache *c, const unsigned char *k, size_t n, uint32_t h, const int32_t *ids, size_t nids) {
    if (n > WC_MAX_KEY || c->n >= WC_MAX_ENTRIES || nids > n) return;
    if (!c->slots || (c->n + 1) * 2 > c->mask + 1) {
        uint32_t nm = c->slots ? c->mask * 2 + 1 : 1023;
        wslot *ns = malloc(sizeof(wslot) * ((size_t)nm + 1));
        if (!ns) return;
        for (uint32_t i = 0; i <= nm; i++) ns[i].key_len = UINT32_MAX;
        for (uint32_t i = 0; c->slots && i <= c->mask; i++) {
            if (c->slots[i].key_len == UINT32_MAX) continue;
            uint32_t j = c->slots[i].hash & nm;
            while (ns[j].key_len != UINT32_MAX) j = (j + 1) & nm;
            ns[j] = c->slots[i];
        }
        free(c->slots);
        c->slots = ns;
        c->mask = nm;
    }
    if (!grow((void **)&c->keys, &c->capkeys, c->nkeys + n + 1, 1)) return;
    if (!grow((void **)&c->vals, &c->capvals, c->nvals + nids + 1, sizeof(int32_t))) return;
    uint32_t j = h & c->mask;
    while (c->slots[j].key_len != UINT32_MAX) j = (j + 1) & c->mask;
    c->slots[j] = (wslot){ h, (uint32_t)c->nkeys, (uint32_t)n, (uint32_t)c->nvals, (uint32_t)nids };
    memcpy(c->keys + c->nkeys, k, n);
    c->nkeys += n;
    if (nids) memcpy(c->vals + c->nvals, ids, nids * sizeof(int32_t));
    c->nvals += nids;
    c->n++;
}

static bool split_symbols(scratch *w, const unsigned char *t, size_t n) {
    w->ns = 0;
    if (!grow((void **)&w->s, &w->cap, n + 1, sizeof(sym))) return false;
    size_t off = 0;
    int32_t idx = 0;
    while (off < n) {
        size_t l = utf8_len(t[off]);
        if (l > n - off) l = n - off;
        sym *s = &w->s[w->ns++];
        s->off = (uint32_t)off;
        s->n = (uint32_t)l;
        off += l;
        s->prev = idx - 1;
        s->next = off == n ? -1 : idx + 1;
        idx++;
    }
    return true;
}

/* llm_tokenizer_spm_session::try_add_bigram */
static void spm_add(const iqf_vocab *v, scratch *w, const unsigned char *t, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t size = w->s[l].n + w->s[r].n;
    if (size > v->max_tok_len) return;
    int32_t id = iqf_vocab_find(v, (const char *)t + w->s[l].off, size);
    if (id < 0) return;
    heap_push(&w->h, (bigram){ v->scores[id], l, r, size });
}

static bool is_ws_sym(const unsigned char *t, const sym *s) {
    return s->n == 3 && t[s->off] == 0xE2 && t[s->off + 1] == 0x96 && t[s->off + 2] == 0x81;
}

/* Merges symbols [a, b) (linked among themselves) and appends their tokens. */
static void spm_chunk(const iqf_vocab *v, scratch *w, const unsigned char *t, int32_t a, int32_t b, ibuf *out) {
    for (int32_t i = a; i < b; i++) {
        w->s[i].prev = i == a ? -1 : i - 1;
        w->s[i].next = i + 1 == b ? -1 : i + 1;
    }
    w->h.n = 0;
    for (int32_t i = a + 1; i < b; i++) spm_add(v, w, t, i - 1, i);
    while (w->h.n > 0 && !w->h.oom) {
        bigram g = heap_pop(&w->h);
        sym *ls = &w->s[g.left], *rs = &w->s[g.right];
        if (ls->n == 0 || rs->n == 0 || ls->n + rs->n != g.size) continue;
        ls->n += rs->n;
        rs->n = 0;
        ls->next = rs->next;
        if (rs->next >= 0) w->s[rs->next].prev = g.left;
        spm_add(v, w, t, ls->prev, g.left);
        spm_add(v, w, t, g.left, ls->next);
    }
    if (w->h.oom) { w->oom = true; return; }
    for (int32_t i = a; i != -1; i = w->s[i].next) {
        const sym *s = &w->s[i];
        int32_t id = iqf_vocab_find(v, (const char *)t + s->off, s->n);
        if (id >= 0) { ib_push(out, id); continue; }
        /* not a token: byte fallback (llama.cpp aborts if a byte has no token; we emit unk
         * or drop the byte) */
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t bt = v->byte_tok[t[s->off + j]];
            if (bt < 0) bt = v->unk;
            if (bt >= 0) ib_push(out, bt);
        }
    }
}

/* llm_tokenizer_spm_session::tokenize. llama.cpp merges the whole fragment in one heap. When no
 * token of the vocab has U+2581 right after something that is not U+2581 (v->spm_split: true
 * for SentencePiece vocabs, checked at load), no merge can cross the start of a U+2581 run, so
 * the text is cut there into words that are merged independently: the same merges happen in
 * the same relative order (the heap order restricted to one word is unchanged), with small
 * heaps instead of one of the size of the text. */
static void spm_tokenize(const iqf_vocab *v, scratch *w, const unsigned char *t, size_t n, ibuf *out) {
    if (n == 0) return;
    if (!split_symbols(w, t, n)) { w->oom = true; return; }
    int32_t ns = (int32_t)w->ns, a = 0;
    for (int32_t i = 1; i <= ns && !w->oom; i++) {
        if (i < ns) {
            if (!v->spm_split || !is_ws_sym(t, &w->s[i])) continue;
            uint32_t off = w->s[i].off;
            if (off >= 3 && t[off - 3] == 0xE2 && t[off - 2] == 0x96 && t[off - 1] == 0x81) continue;
        }
        /* the chunk's bytes: s[a].off .. start of s[i] (or the end) */
        size_t k0 = w->s[a].off, k1 = i < ns ? w->s[i].off : n;
        uint32_t h, nv;
        const int32_t *hit = wc_get(&w->wc, t + k0, k1 - k0, &h, &nv);
        if (hit) {
            for (uint32_t j = 0; j < nv; j++) ib_push(out, hit[j]);
        } else {
            size_t before = out->n;
            spm_chunk(v, w, t, a, i, out);
            if (!out->oom && !w->oom) wc_put(&w->wc, t + k0, k1 - k0, h, out->n > before ? out->p + before : NULL, out->n - before);
        }
        a = i;
    }
}

/* unicode_regex_split_custom_gpt2 over cpt[0..n): calls emit(word start, word end). */
static int gpt2_cls(const uint32_t *c, size_t n, size_t pos) {
    return pos < n ? uc_class(c[pos]) : UC_NONE;
}

static void bpe_word(const iqf_vocab *v, scratch *w, const uint32_t *c, size_t n, ibuf *out);

static void gpt2_split(const iqf_vocab *v, scratch *w, const uint32_t *c, size_t n, ibuf *out) {
    size_t pos = 0, prev = 0;
#define EMIT(end)                                                    \
    do {                                                             \
        size_t e_ = (end);                                           \
        if (e_ > prev) bpe_word(v, w, c + prev, e_ - prev, out);     \
        prev = e_;                                                   \
    } while (0)
    while (pos < n) {
        uint32_t cp = c[pos];
        int f = gpt2_cls(c, n, pos);
        if (cp == '\'' && pos + 1 < n) {
            uint32_t nx = c[pos + 1];
            if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd') { EMIT(pos + 2); pos += 2; continue; }
            if (pos + 2 < n) {
                uint32_t nn = c[pos + 2];
                if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') || (nx == 'l' && nn == 'l')) {
                    EMIT(pos + 3);
                    pos += 3;
                    continue;
                }
            }
        }
        int f2 = cp == ' ' ? gpt2_cls(c, n, pos + 1) : f;
        if (f2 == UC_LETTER || f2 == UC_NUMBER || f2 == UC_OTHER) {
            pos += (cp == ' ');
            while (gpt2_cls(c, n, pos) == f2) pos++;
            EMIT(pos);
            continue;
        }
        size_t nws = 0;
        while (gpt2_cls(c, n, pos + nws) == UC_SPACE) nws++;
        if (nws > 1 && pos + nws < n) { pos += nws - 1; EMIT(pos); continue; }
        if (nws > 0) { pos += nws; EMIT(pos); continue; }
        pos++;
        EMIT(pos);
    }
#undef EMIT
}

/* llm_tokenizer_bpe_session::tokenize for one pre-tokenized word */
static void bpe_word(const iqf_vocab *v, scratch *w, const uint32_t *c, size_t n, ibuf *out) {
    if (w->oom) return;
    /* code points -> UTF-8 -> GPT-2 byte encoding */
    if (!grow((void **)&w->buf, &w->capbuf, n * 8 + 1, 1)) { w->oom = true; return; }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char u[4];
        int k = utf8_encode(c[i], u);
        for (int j = 0; j < k; j++) {
            memcpy(w->buf + m, v->bmap[u[j]], v->bmap_len[u[j]]);
            m += v->bmap_len[u[j]];
        }
    }
    const unsigned char *t = w->buf;
    uint32_t h, nv;
    const int32_t *hit = wc_get(&w->wc, t, m, &h, &nv);
    if (hit) {
        for (uint32_t j = 0; j < nv; j++) ib_push(out, hit[j]);
        return;
    }
    const size_t before = out->n;
    if (!split_symbols(w, t, m)) { w->oom = true; return; }
    w->h.n = 0;
    for (size_t i = 1; i < w->ns; i++) {
        const sym *l = &w->s[i - 1], *r = &w->s[i];
        int32_t rank = merge_rank(v, (const char *)t + l->off, l->n, (const char *)t + r->off, r->n);
        if (rank >= 0) heap_push(&w->h, (bigram){ -(double)rank, (int32_t)i - 1, (int32_t)i, l->n + r->n });
    }
    while (w->h.n > 0 && !w->h.oom) {
        bigram g = heap_pop(&w->h);
        sym *ls = &w->s[g.left], *rs = &w->s[g.right];
        if (ls->n == 0 || rs->n == 0 || ls->n + rs->n != g.size) continue;
        ls->n += rs->n;
        rs->n = 0;
        ls->next = rs->next;
        if (rs->next >= 0) w->s[rs->next].prev = g.left;
        int32_t pairs[2][2] = { { ls->prev, g.left }, { g.left, ls->next } };
        for (int k = 0; k < 2; k++) {
            int32_t a = pairs[k][0], b = pairs[k][1];
            if (a < 0 || b < 0) continue;
            const sym *l = &w->s[a], *r = &w->s[b];
            int32_t rank = merge_rank(v, (const char *)t + l->off, l->n, (const char *)t + r->off, r->n);
            if (rank >= 0) heap_push(&w->h, (bigram){ -(double)rank, a, b, l->n + r->n });
        }
    }
    if (w->h.oom) { w->oom = true; return; }
    for (size_t i = 0; i < w->ns; i++) {
        const sym *s = &w->s[i];
        if (s->n == 0) continue;
        int32_t id = iqf_vocab_find(v, (const char *)t + s->off, s->n);
        if (id >= 0) { ib_push(out, id); continue; }
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t b = v->raw_byte_tok[t[s->off + j]];
            if (b >= 0) ib_push(out, b);
        }
    }
    if (!out->oom) wc_put(&w->wc, t, m, h, out->n > before ? out->p + before : NULL, out->n - before);
}

static void bpe_tokenize(const iqf_vocab *v, scratch *w, const unsigned char *t, size_t n, ibuf *out) {
    if (!grow((void **)&w->cpt, &w->capcpt, n + 1, sizeof(uint32_t))) { w->oom = true; return; }
    size_t nc = 0;
    for (size_t i = 0; i < n;) w->cpt[nc++] = utf8_decode(t, n, &i);
    /* bpe_word reuses w->buf / w->s, not w->cpt */
    gpt2_split(v, w, w->cpt, nc, out);
}

/* tokenizer_st_partition: fragments of raw text and special tokens. */
typedef struct frag { int32_t token; size_t off, len; } frag; /* token < 0: raw text */

#define GRAM_WORDS (1u << 14) /* 2^20 bits */
static uint32_t gram_hash(const unsigned char *p) {
    uint32_t x = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
    return (x * 0x9E3779B1u) >> 12;
}

static bool is_space_c(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static frag *partition(const iqf_vocab *v, const char *text, size_t len, bool parse_special, size_t *nfrag) {
    size_t cap = 16, n = 0;
    frag *f = malloc(cap * sizeof *f);
    if (!f) return NULL;
    if (len > 0) f[n++] = (frag){ -1, 0, len };
    frag *g = NULL;
    size_t gcap = 0;
    /* Many special tokens over a long text (e.g. parse_special with thousands of control
     * tokens): a bitmap of the text's 3-byte grams rejects most tokens without a scan. */
    uint64_t *grams = NULL;
    int32_t considered = 0;
    for (int32_t si = 0; si < v->n_special; si++)
        if (parse_special || !(v->attr[v->special[si]] & (IQF_TOKATTR_CONTROL | IQF_TOKATTR_UNKNOWN))) considered++;
    if (len >= 3 && (uint64_t)considered * len > (1u << 22)) {
        grams = calloc(GRAM_WORDS, sizeof(uint64_t));
        if (grams)
            for (size_t i = 0; i + 3 <= len; i++) {
                uint32_t h = gram_hash((const unsigned char *)text + i);
                grams[h >> 6] |= 1ull << (h & 63);
            }
    }
    for (int32_t si = 0; si < v->n_special; si++) {
        int32_t id = v->special[si];
        uint32_t a = v->attr[id];
        if (!parse_special && (a & (IQF_TOKATTR_CONTROL | IQF_TOKATTR_UNKNOWN))) continue;
        const char *st = v->text + v->tok_off[id];
        size_t sl = v->tok_len[id];
        if (grams && sl >= 3) {
            bool maybe = true;
            for (size_t i = 0; i + 3 <= sl && i < 16 && maybe; i++) {
                uint32_t h = gram_hash((const unsigned char *)st + i);
                maybe = (grams[h >> 6] >> (h & 63)) & 1;
            }
            if (!maybe) continue;
        }
        /* quick reject: any raw fragment containing the text? */
        bool any = false;
        for (size_t k = 0; k < n && !any; k++)
            if (f[k].token < 0 && memmem(text + f[k].off, f[k].len, st, sl)) any = true;
        if (!any) continue;
        size_t gn = 0;
        for (size_t k = 0; k < n; k++) {
            if (!grow((void **)&g, &gcap, gn + 3, sizeof *g)) { free(f); free(g); free(grams); return NULL; }
            if (f[k].token >= 0) { g[gn++] = f[k]; continue; }
            size_t off = f[k].off, l = f[k].len;
            for (;;) {
                const char *m = l ? memmem(text + off, l, st, sl) : NULL;
                if (!m) { if (l > 0) g[gn++] = (frag){ -1, off, l }; break; }
                size_t mp = (size_t)(m - text);
                if (!grow((void **)&g, &gcap, gn + 3, sizeof *g)) { free(f); free(g); free(grams); return NULL; }
                if (mp > off) {
                    size_t ll = mp - off;
                    if (a & IQF_TOKATTR_LSTRIP)
                        while (ll > 0 && is_space_c((unsigned char)text[off + ll - 1])) ll--;
                    if (ll > 0) g[gn++] = (frag){ -1, off, ll };
                }
                g[gn++] = (frag){ id, 0, 0 };
                if (mp + sl < off + l) {
                    size_t ro = mp + sl, rl = off + l - ro;
                    if (a & IQF_TOKATTR_RSTRIP)
                        while (rl > 0 && is_space_c((unsigned char)text[ro])) { ro++; rl--; }
                    off = ro;
                    l = rl;
                } else {
                    break;
                }
            }
        }
        frag *tmp = f; f = g; g = tmp;
        size_t tc = cap; cap = gcap; gcap = tc;
        n = gn;
    }
    free(g);
    free(grams);
    *nfrag = n;
    return f;
}

static int32_t tokenize_impl(const iqf_vocab *v, const char *text, size_t len, bool add_special,
                             bool parse_special, int32_t *out, int32_t max_out) {
    if (!v || (!text && len) || max_out < 0 || (!out && max_out > 0)) return IQF_TOKENIZE_ERROR;
    if (len > (size_t)INT32_MAX / 4) return IQF_TOKENIZE_ERROR;
    size_t nf = 0;
    frag *f = partition(v, text, len, parse_special, &nf);
    if (!f) return IQF_TOKENIZE_ERROR;
    ibuf o = { 0 };
    scratch w;
    memset(&w, 0, sizeof w);
    if (v->type == IQF_VOCAB_SPM) {
        bool prev_special = true;
        if (add_special && v->add_bos && v->bos >= 0) ib_push(&o, v->bos);
        unsigned char *esc = NULL;
        size_t esccap = 0;
        for (size_t k = 0; k < nf && !w.oom; k++) {
            if (f[k].token >= 0) { ib_push(&o, f[k].token); prev_special = true; continue; }
            if (!grow((void **)&esc, &esccap, 3 * (f[k].len + 1), 1)) { w.oom = true; break; }
            size_t m = 0;
            const char *p = text + f[k].off;
            if (v->add_space_prefix && prev_special) { memcpy(esc, "\xe2\x96\x81", 3); m = 3; }
            for (size_t i = 0; i < f[k].len; i++) {
                if (p[i] == ' ') { memcpy(esc + m, "\xe2\x96\x81", 3); m += 3; }
                else esc[m++] = (unsigned char)p[i];
            }
            spm_tokenize(v, &w, esc, m, &o);
            prev_special = false;
        }
        free(esc);
        if (add_special && v->add_eos && v->eos >= 0) ib_push(&o, v->eos);
    } else {
        if (add_special && v->add_bos && v->bos >= 0) ib_push(&o, v->bos);
        for (size_t k = 0; k < nf && !w.oom; k++) {
            if (f[k].token >= 0) { ib_push(&o, f[k].token); continue; }
            bpe_tokenize(v, &w, (const unsigned char *)text + f[k].off, f[k].len, &o);
        }
        if (add_special && v->add_eos && v->eos >= 0) ib_push(&o, v->eos);
    }
    free(f);
    free(w.s); free(w.h.p); free(w.buf); free(w.cpt);
    free(w.wc.slots); free(w.wc.keys); free(w.wc.vals);
    int32_t ret;
    if (w.oom || o.oom || o.n > (size_t)INT32_MAX) {
        ret = IQF_TOKENIZE_ERROR;
    } else if (o.n > (size_t)max_out) {
        ret = -(int32_t)o.n;
    } else {
        if (o.n) memcpy(out, o.p, o.n * sizeof *out);
        ret = (int32_t)o.n;
    }
    free(o.p);
    return ret;
}

int32_t iqf_tokenize(const iqf_vocab *v, const char *text, size_t len, bool add_special,
                     int32_t *out, int32_t max_out) {
    return tokenize_impl(v, text, len, add_special, false, out, max_out);
}

int32_t iqf_tokenize_ex(const iqf_vocab *v, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t *out, int32_t max_out) {
    return tokenize_impl(v, text, len, add_special, parse_special, out, max_out);
}

/* ------------------------------------------------------------------------------------------ */
/* Detokenizing                                                                                */

const char *iqf_token_piece(const iqf_vocab *v, int32_t id, bool special, size_t *len) {
    if (!v || id < 0 || id >= v->n_tokens) { if (len) *len = 0; return NULL; }
    if (!special && (v->attr[id] & (IQF_TOKATTR_UNKNOWN | IQF_TOKATTR_CONTROL))) {
        if (len) *len = 0;
        return v->piece + v->piece_off[id];
    }
    if (len) *len = v->piece_len[id];
    return v->piece + v->piece_off[id];
}

int32_t iqf_token_to_piece(const iqf_vocab *v, int32_t id, char *buf, int32_t buflen,
                           int32_t lstrip, bool special) {
    size_t n;
    const char *p = iqf_token_piece(v, id, special, &n);
    if (!p) return 0;
    for (int32_t i = 0; i < lstrip && n && *p == ' '; i++) { p++; n--; }
    if (buflen < 0 || (size_t)buflen < n) return -(int32_t)n;
    if (n) memcpy(buf, p, n);
    return (int32_t)n;
}

int32_t iqf_detokenize(const iqf_vocab *v, const int32_t *tokens, int32_t n_tokens, char *text,
                       int32_t text_max, bool remove_special, bool unparse_special) {
    if (!v || n_tokens < 0 || (!tokens && n_tokens) || text_max < 0 || (!text && text_max))
        return IQF_TOKENIZE_ERROR;
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= v->n_tokens) return IQF_TOKENIZE_ERROR;
    bool remove_space = v->add_space_prefix;
    if (remove_special && v->add_bos && n_tokens > 0 && tokens[0] == v->bos) {
        remove_space = false;
        n_tokens--;
        tokens++;
    }
    if (remove_special && v->add_eos && n_tokens > 0 && tokens[n_tokens - 1] == v->eos) n_tokens--;
    int64_t total = 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        size_t n;
        const char *p = iqf_token_piece(v, tokens[i], unparse_special, &n);
        if (remove_space && n && *p == ' ') { p++; n--; }
        remove_space = false;
        if (n && total + (int64_t)n <= text_max) memcpy(text + total, p, n);
        total += (int64_t)n;
        if (total > INT32_MAX) return IQF_TOKENIZE_ERROR;
    }
    if (total > text_max) return -(int32_t)total;
    if (v->clean_spaces && total > 0) {
        char *t = text;
        /* " ?", " !", " .", " ," lose the space */
        int32_t t1 = (int32_t)total, k = 1;
        for (int32_t i = 1; i < t1; i++) {
            char x = t[i];
            if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) k--;
            t[k++] = x;
        }
        /* " ' " -> "'" */
        int32_t t2 = k;
        k = 1;
        for (int32_t i = 1; i < t2; i++) {
            char x = t[i];
            if (x == '\'' && i + 1 < t2 && t[i - 1] == ' ' && t[i + 1] == ' ') {
                k--;
                t[++i] = '\0';
            }
            t[k++] = x;
        }
        /* " 's", " 'm", " 're", " 've" lose the space */
        int32_t t3 = k;
        k = 1;
        for (int32_t i = 1; i < t3; i++) {
            char x = t[i];
            if (t[i - 1] == ' ' && x == '\'' && i + 1 < t3) {
                char x1 = t[i + 1];
                if (x1 == 's' || x1 == 'm') k--;
                else if (i + 2 < t3) {
                    char x2 = t[i + 2];
                    if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) k--;
                }
            }
            t[k++] = x;
        }
        total = k;
    }
    return (int32_t)total;
}

/* ------------------------------------------------------------------------------------------ */
/* Loading from GGUF                                                                           */

static bool is_int_vtype(int t) {
    return t == IQF_GGUF_U8 || t == IQF_GGUF_I8 || t == IQF_GGUF_U16 || t == IQF_GGUF_I16 ||
           t == IQF_GGUF_U32 || t == IQF_GGUF_I32 || t == IQF_GGUF_U64 || t == IQF_GGUF_I64;
}

iqf_vocab *iqf_vocab_load(const iqf_gguf *g, char *err, size_t errlen) {
    char msg[400] = "";
    iqf_vocab *v = NULL;
    iqf_vocab_arrays a = iqf_vocab_arrays_init();
    const char **toks = NULL, **merges = NULL;
    uint64_t *tlens = NULL, *mlens = NULL;
    const char *path = g ? iqf_gguf_path(g) : "(null)";
    if (!g) { snprintf(msg, sizeof msg, "no file"); goto fail; }

    int64_t k = iqf_gguf_find_kv(g, "tokenizer.ggml.model");
    if (k < 0) { snprintf(msg, sizeof msg, "no tokenizer.ggml.model (no vocabulary in this file)"); goto fail; }
    if (iqf_gguf_kv_type(g, k) != IQF_GGUF_STR) {
        snprintf(msg, sizeof msg, "tokenizer.ggml.model is %s, not str", iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)));
        goto fail;
    }
    a.model = iqf_gguf_kv_value(g, k);
    static const char *const str_keys[2] = { "tokenizer.ggml.pre", "general.name" };
    for (int s = 0; s < 2; s++) {
        k = iqf_gguf_find_kv(g, str_keys[s]);
        if (k < 0) continue;
        if (iqf_gguf_kv_type(g, k) != IQF_GGUF_STR) {
            snprintf(msg, sizeof msg, "%s is %s, not str", str_keys[s], iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)));
            goto fail;
        }
        if (s == 0) a.pre = iqf_gguf_kv_value(g, k);
        else a.name = iqf_gguf_kv_value(g, k);
    }

    /* tokens */
    k = iqf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (k < 0) { snprintf(msg, sizeof msg, "no tokenizer.ggml.tokens"); goto fail; }
    if (iqf_gguf_kv_type(g, k) != IQF_GGUF_ARR || iqf_gguf_arr_type(g, k) != IQF_GGUF_STR) {
        snprintf(msg, sizeof msg, "tokenizer.ggml.tokens is not an array of strings");
        goto fail;
    }
    uint64_t n = iqf_gguf_arr_n(g, k);
    if (n == 0 || n > INT32_MAX / 2) { snprintf(msg, sizeof msg, "tokenizer.ggml.tokens has %llu entries", (unsigned long long)n); goto fail; }
    toks = malloc(sizeof(char *) * n);
    tlens = malloc(sizeof(uint64_t) * n);
    if (!toks || !tlens) { snprintf(msg, sizeof msg, "out of memory"); goto fail; }
    for (uint64_t j = 0; j < n; j++) {
        size_t l = 0;
        toks[j] = iqf_gguf_arr_str(g, k, j, &l);
        tlens[j] = l;
        if (!toks[j]) { snprintf(msg, sizeof msg, "tokenizer.ggml.tokens[%llu] unreadable", (unsigned long long)j); goto fail; }
    }
    a.n_tokens = (int64_t)n;
    a.tokens = toks;
    a.token_lens = tlens;

    /* scores, token types */
    k = iqf_gguf_find_kv(g, "tokenizer.ggml.scores");
    if (k >= 0) {
        uint64_t ns = 0;
        a.scores = iqf_gguf_arr_data(g, k, IQF_GGUF_F32, &ns);
        if (!a.scores) {
            snprintf(msg, sizeof msg, "tokenizer.ggml.scores is %s%s%s, not an array of f32",
                     iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)), iqf_gguf_kv_type(g, k) == IQF_GGUF_ARR ? " of " : "",
                     iqf_gguf_kv_type(g, k) == IQF_GGUF_ARR ? iqf_gguf_vtype_name(iqf_gguf_arr_type(g, k)) : "");
            goto fail;
        }
        a.n_scores = (int64_t)ns;
    }
    k = iqf_gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (k >= 0) {
        uint64_t nt = 0;
        a.token_types = iqf_gguf_arr_data(g, k, IQF_GGUF_I32, &nt);
        if (!a.token_types) {
            snprintf(msg, sizeof msg, "tokenizer.ggml.token_type is %s%s%s, not an array of i32",
                     iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)), iqf_gguf_kv_type(g, k) == IQF_GGUF_ARR ? " of " : "",
                     iqf_gguf_kv_type(g, k) == IQF_GGUF_ARR ? iqf_gguf_vtype_name(iqf_gguf_arr_type(g, k)) : "");
            goto fail;
        }
        a.n_token_types = (int64_t)nt;
    }

    /* merges */
    k = iqf_gguf_find_kv(g, "tokenizer.ggml.merges");
    if (k < 0 && strcmp(a.model, "gpt2") == 0) { snprintf(msg, sizeof msg, "no tokenizer.ggml.merges (required for gpt2)"); goto fail; }
    if (k >= 0 && strcmp(a.model, "gpt2") == 0) {
        if (iqf_gguf_kv_type(g, k) != IQF_GGUF_ARR || iqf_gguf_arr_type(g, k) != IQF_GGUF_STR) {
            snprintf(msg, sizeof msg, "tokenizer.ggml.merges is not an array of strings");
            goto fail;
        }
        uint64_t nm = iqf_gguf_arr_n(g, k);
        if (nm > INT32_MAX / 2) { snprintf(msg, sizeof msg, "tokenizer.ggml.merges has %llu entries", (unsigned long long)nm); goto fail; }
        merges = malloc(sizeof(char *) * (nm + 1));
        mlens = malloc(sizeof(uint64_t) * (nm + 1));
        if (!merges || !mlens) { snprintf(msg, sizeof msg, "out of memory"); goto fail; }
        for (uint64_t j = 0; j < nm; j++) {
            size_t l = 0;
            merges[j] = iqf_gguf_arr_str(g, k, j, &l);
            mlens[j] = l;
            if (!merges[j]) { snprintf(msg, sizeof msg, "tokenizer.ggml.merges[%llu] unreadable", (unsigned long long)j); goto fail; }
        }
        a.n_merges = (int64_t)nm;
        a.merges = merges;
        a.merge_lens = mlens;
    }

    /* special ids and flags */
    static const char *const id_keys[7] = { "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
        "tokenizer.ggml.padding_token_id", "tokenizer.ggml.seperator_token_id" };
    int64_t *id_dst[7] = { &a.bos_id, &a.eos_id, &a.unk_id, &a.eot_id, &a.eom_id, &a.pad_id, &a.sep_id };
    for (int s = 0; s < 7; s++) {
        k = iqf_gguf_find_kv(g, id_keys[s]);
        if (k < 0) continue;
        int64_t val;
        if (!is_int_vtype(iqf_gguf_kv_type(g, k)) || !iqf_gguf_get_int(g, id_keys[s], &val)) {
            snprintf(msg, sizeof msg, "%s is %s, not an integer", id_keys[s], iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)));
            goto fail;
        }
        *id_dst[s] = val < 0 ? INT64_MAX : val; /* out of range: ignored, as llama.cpp does */
    }
    static const char *const flag_keys[3] = { "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                               "tokenizer.ggml.add_space_prefix" };
    int *flag_dst[3] = { &a.add_bos, &a.add_eos, &a.add_space_prefix };
    for (int s = 0; s < 3; s++) {
        k = iqf_gguf_find_kv(g, flag_keys[s]);
        if (k < 0) continue;
        bool b;
        if (!iqf_gguf_get_bool(g, flag_keys[s], &b)) {
            snprintf(msg, sizeof msg, "%s is %s, not bool", flag_keys[s], iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)));
            goto fail;
        }
        *flag_dst[s] = b ? 1 : 0;
    }

    v = iqf_vocab_from_arrays(&a, msg, sizeof msg);
    free(toks); free(tlens); free(merges); free(mlens);
    if (!v && err && errlen) snprintf(err, errlen, "%s: %s", path, msg);
    return v;

fail:
    free(toks); free(tlens); free(merges); free(mlens);
    if (err && errlen) snprintf(err, errlen, "%s: tokenizer: %s", path, msg);
    return NULL;
}
