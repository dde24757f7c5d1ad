#!/usr/bin/env python3
"""spm_ref.py MODEL - what sentencepiece itself reads from a tokenizer.model, as
convert_hf_to_gguf.py's _create_vocab_sentencepiece takes it: one line per id,
"ID PIECE_HEX SCORE_F32_HEX TYPE" (TYPE by its IsUnknown/IsControl/IsUnused/IsByte chain), or a
single line "error MESSAGE" when SentencePieceProcessor refuses the file. Used by
test_convert_spm.c as an independent reference where python3 has sentencepiece (Debian:
python3-sentencepiece); the test skips this check otherwise."""
import struct
import sys

from sentencepiece import SentencePieceProcessor

sp = SentencePieceProcessor()
try:
    ok = sp.LoadFromFile(sys.argv[1])
except Exception as e:  # noqa: BLE001 - any refusal is the answer
    print("error", " ".join(str(e).split()))
    sys.exit(0)
if ok is False:
    print("error load returned false")
    sys.exit(0)
for i in range(sp.vocab_size()):
    t = 1
    if sp.IsUnknown(i):
        t = 2
    elif sp.IsControl(i):
        t = 3
    elif sp.IsUnused(i):
        t = 5
    elif sp.IsByte(i):
        t = 6
    print(i, sp.IdToPiece(i).encode("utf-8").hex(), struct.pack("<f", sp.GetScore(i)).hex(), t)
