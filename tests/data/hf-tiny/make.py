#!/usr/bin/env python3
"""Rebuilds tests/data/hf-tiny/ckpt (stdlib only): a one-layer Mistral-shaped checkpoint with a
48-token Llama-2-style tokenizer.json, weights by mkhf.py's rule (../shared/hfref/mkhf.py)."""
import json, os, struct, sys

M64 = (1 << 64) - 1
def fnv1a64(b):
    h = 0xcbf29ce484222325
    for c in b: h = ((h ^ c) * 0x100000001b3) & M64
    return h
def splitmix(z):
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & M64
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB & M64
    return z ^ (z >> 31)
def f32(x): return struct.unpack('<f', struct.pack('<f', x))[0]
def bf16(x):
    u = struct.unpack('<I', struct.pack('<f', x))[0]
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
def values(name, shape):
    n = 1
    for d in shape: n *= d
    h = fnv1a64(name.encode())
    out = []
    for i in range(n):
        k = splitmix((h + (i + 1) * 0x9E3779B97F4A7C15) & M64) >> 40
        v = (k - 8388608.0) / 8388608.0
        out.append(f32(1.0 + v / 16.0) if (len(shape) == 1 and 'norm' in name) else f32(v / 32.0))
    return out

H, I, NH, NKV, HD, V = 32, 64, 4, 2, 8, 48
shapes = {'lm_head.weight': [V, H], 'model.embed_tokens.weight': [V, H], 'model.norm.weight': [H]}
L = 'model.layers.0.'
shapes.update({L + 'input_layernorm.weight': [H], L + 'post_attention_layernorm.weight': [H],
               L + 'self_attn.q_proj.weight': [NH * HD, H], L + 'self_attn.k_proj.weight': [NKV * HD, H],
               L + 'self_attn.v_proj.weight': [NKV * HD, H], L + 'self_attn.o_proj.weight': [H, NH * HD],
               L + 'mlp.gate_proj.weight': [I, H], L + 'mlp.up_proj.weight': [I, H], L + 'mlp.down_proj.weight': [H, I]})
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'ckpt')
os.makedirs(out, exist_ok=True)
hdr, data, off = {'__metadata__': {'format': 'pt'}}, b'', 0
for name in sorted(shapes):
    raw = b''.join(struct.pack('<H', bf16(x)) for x in values(name, shapes[name]))
    hdr[name] = {'dtype': 'BF16', 'shape': shapes[name], 'data_offsets': [off, off + len(raw)]}
    data += raw; off += len(raw)
hb = json.dumps(hdr, separators=(',', ':')).encode()
with open(os.path.join(out, 'model.safetensors'), 'wb') as f:
    f.write(struct.pack('<Q', len(hb)) + hb + data)
cfg = {'architectures': ['MistralForCausalLM'], 'bos_token_id': 1, 'eos_token_id': 2, 'head_dim': HD,
       'hidden_size': H, 'intermediate_size': I, 'max_position_embeddings': 256, 'model_type': 'mistral',
       'num_attention_heads': NH, 'num_hidden_layers': 1, 'num_key_value_heads': NKV, 'rms_norm_eps': 1e-05,
       'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'}, 'tie_word_embeddings': False,
       'vocab_size': V}
json.dump(cfg, open(os.path.join(out, 'config.json'), 'w'), indent=2)
toks = ['<unk>', '<s>', '</s>'] + ['<0x%02X>' % b for b in range(10)] + \
       ['\u2581', 'a', 'b', 'c', 'd', 'e', 'h', 'l', 'o', 'r', 't', 'w', '\u2581t', '\u2581a', 'he', '\u2581the',
        'll', 'lo', '\u2581w', 'or', '\u2581wor', 'ld', '\u2581world', 'hel', 'hello', '\u2581hello',
        'ab', 'cd', 'ed', 'ee', 'ar', 'at', 'ot', 'ro', 'ta']
toks = toks[:V]
merges = ['\u2581 t', '\u2581 a', 'h e', '\u2581t he', 'l l', 'l o', '\u2581 w', 'o r', '\u2581w or', 'l d',
          '\u2581wor ld', 'he l', 'hel lo', '\u2581 hello']
tj = {'version': '1.0', 'truncation': None, 'padding': None,
      'added_tokens': [{'id': i, 'content': t, 'single_word': False, 'lstrip': False, 'rstrip': False,
                        'normalized': False, 'special': True} for i, t in enumerate(toks[:3])],
      'normalizer': {'type': 'Sequence', 'normalizers': [{'type': 'Prepend', 'prepend': '\u2581'},
                                                         {'type': 'Replace', 'pattern': {'String': ' '}, 'content': '\u2581'}]},
      'pre_tokenizer': None,
      'post_processor': {'type': 'TemplateProcessing',
                         'single': [{'SpecialToken': {'id': '<s>', 'type_id': 0}}, {'Sequence': {'id': 'A', 'type_id': 0}}],
                         'pair': [{'SpecialToken': {'id': '<s>', 'type_id': 0}}, {'Sequence': {'id': 'A', 'type_id': 0}},
                                  {'SpecialToken': {'id': '<s>', 'type_id': 1}}, {'Sequence': {'id': 'B', 'type_id': 1}}],
                         'special_tokens': {'<s>': {'id': '<s>', 'ids': [1], 'tokens': ['<s>']}}},
      'decoder': {'type': 'Sequence', 'decoders': [{'type': 'Replace', 'pattern': {'String': '\u2581'}, 'content': ' '},
                                                   {'type': 'ByteFallback'}, {'type': 'Fuse'}]},
      'model': {'type': 'BPE', 'dropout': None, 'unk_token': '<unk>', 'continuing_subword_prefix': None,
                'end_of_word_suffix': None, 'fuse_unk': True, 'byte_fallback': True,
                'vocab': {t: i for i, t in enumerate(toks)}, 'merges': merges}}
json.dump(tj, open(os.path.join(out, 'tokenizer.json'), 'w'), indent=1, ensure_ascii=False)
tc = {'add_bos_token': True, 'add_eos_token': False, 'bos_token': '<s>', 'eos_token': '</s>', 'unk_token': '<unk>',
      'pad_token': None, 'legacy': True, 'tokenizer_class': 'LlamaTokenizer',
      'chat_template': "{% for m in messages %}{{ m['content'] }}{% endfor %}"}
json.dump(tc, open(os.path.join(out, 'tokenizer_config.json'), 'w'), indent=2)
