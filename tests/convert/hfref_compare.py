#!/usr/bin/env python3
"""hfref_compare.py REF.jsonl FILE.gguf [NAME]: compares a GGUF file with its description in
../shared/hfref/hf-convert-reference.jsonl (what llama.cpp's convert_hf_to_gguf.py wrote).
Prints "NAME: identical" (exit 0) or the first differing key or tensor (exit 1). Stdlib only."""
import hashlib, json, struct, sys

SCAL = {0: ('UINT8', '<B'), 1: ('INT8', '<b'), 2: ('UINT16', '<H'), 3: ('INT16', '<h'), 4: ('UINT32', '<I'),
        5: ('INT32', '<i'), 6: ('FLOAT32', '<f'), 7: ('BOOL', '<?'), 10: ('UINT64', '<Q'), 11: ('INT64', '<q'),
        12: ('FLOAT64', '<d')}
TT = {0: 'F32', 1: 'F16', 8: 'Q8_0', 30: 'BF16'}

def read(path):
    b = open(path, 'rb').read()
    o = 0
    def u(fmt):
        nonlocal o
        v = struct.unpack_from(fmt, b, o)[0]; o += struct.calcsize(fmt); return v
    def s():
        nonlocal o
        n = u('<Q'); v = b[o:o + n]; o += n; return v
    assert b[:4] == b'GGUF'; o = 4
    ver = u('<I'); nt = u('<Q'); nkv = u('<Q')
    kvs = [('GGUF.version', ['UINT32'], ver, None), ('GGUF.tensor_count', ['UINT64'], nt, None),
           ('GGUF.kv_count', ['UINT64'], nkv, None)]
    for _ in range(nkv):
        k = s().decode(); t = u('<I')
        if t == 8:
            kvs.append((k, ['STRING'], s().decode('utf-8', 'replace'), None))
        elif t == 9:
            et = u('<I'); n = u('<Q'); start = o
            if et == 8:
                for _ in range(n): s()
                name = 'STRING'
            else:
                name, fmt = SCAL[et]; o += n * struct.calcsize(fmt)
            kvs.append((k, ['ARRAY', name], n, hashlib.sha256(b[start:o]).hexdigest()))
        else:
            name, fmt = SCAL[t]; kvs.append((k, [name], u(fmt), None))
    tens = []
    for _ in range(nt):
        n = s().decode(); nd = u('<I'); shape = [u('<Q') for _ in range(nd)]; ty = u('<I'); off = u('<Q')
        tens.append([n, TT.get(ty, str(ty)), shape, off])
    base = (o + 31) // 32 * 32
    for i, t in enumerate(tens):
        end = tens[i + 1][3] if i + 1 < len(tens) else len(b) - base
        # size from the type
        ne = 1
        for d in t[2]: ne *= d
        size = {'F32': ne * 4, 'F16': ne * 2, 'BF16': ne * 2, 'Q8_0': ne // 32 * 34}[t[1]]
        t.append(size); t.append(hashlib.sha256(b[base + t[3]:base + t[3] + size]).hexdigest())
    return b, kvs, tens

def main():
    ref, path = sys.argv[1], sys.argv[2]
    name = sys.argv[3] if len(sys.argv) > 3 else path.rsplit('/', 1)[-1]
    r = next((json.loads(l) for l in open(ref) if json.loads(l).get('kind') == 'gguf' and json.loads(l)['file'] == name), None)
    if r is None:
        print(f'{name}: not in {ref}'); return 1
    b, kvs, tens = read(path)
    if hashlib.sha256(b).hexdigest() == r['file_sha256']:
        print(f'{name}: identical'); return 0
    for i, want in enumerate(r['kv']):
        if i >= len(kvs):
            print(f'{name}: key {want["key"]} missing (file has {len(kvs)} keys)'); return 1
        k, t, v, h = kvs[i]
        if k != want['key'] or t != want['type']:
            print(f'{name}: key #{i} is {k} {t}, the converter wrote {want["key"]} {want["type"]}'); return 1
        if h is not None:
            if v != want['n'] or h != want['sha256']:
                print(f'{name}: key {k}: array of {v} (sha256 {h[:12]}) != {want["n"]} ({want["sha256"][:12]})'); return 1
        elif v != want['value'] and not (isinstance(v, float) and abs(v - want['value']) == 0):
            print(f'{name}: key {k}: {v!r} != {want["value"]!r}'); return 1
    if len(kvs) != len(r['kv']):
        print(f'{name}: {len(kvs)} keys, the converter wrote {len(r["kv"])} (extra: {kvs[len(r["kv"])][0]})'); return 1
    for i, want in enumerate(r['tensors']):
        if i >= len(tens):
            print(f'{name}: tensor {want["name"]} missing'); return 1
        n, ty, shape, off, size, h = tens[i]
        if n != want['name'] or ty != want['type'] or shape != want['shape']:
            print(f'{name}: tensor #{i} is {n} {ty} {shape}, the converter wrote {want["name"]} {want["type"]} {want["shape"]}'); return 1
        if h != want['sha256']:
            print(f'{name}: tensor {n}: data differs (sha256 {h[:12]} != {want["sha256"][:12]})'); return 1
    print(f'{name}: file differs but every key and tensor matches (padding or layout)'); return 1

if __name__ == '__main__':
    sys.exit(main())
