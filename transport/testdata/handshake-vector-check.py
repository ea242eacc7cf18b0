# An independent Noise XX implementation, written from the Noise spec (rev 34)
# with the Python cryptography package, that checks handshake-vector.txt:
#
#   python3 handshake-vector-check.py handshake-vector.txt
#
# It recomputes the three handshake records, the handshake hash, the first
# transport record each way and the identity binding signatures.
import hashlib, hmac, struct, sys
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives import serialization as S

v = {}
for line in open(sys.argv[1]):
    if line.startswith('#') or not line.strip(): continue
    k, x = line.split(': '); v[k] = bytes.fromhex(x.strip())

def pub(priv): return X25519PrivateKey.from_private_bytes(priv).public_key().public_bytes(S.Encoding.Raw, S.PublicFormat.Raw)
def dh(priv, pubb): return X25519PrivateKey.from_private_bytes(priv).exchange(X25519PublicKey.from_public_bytes(pubb))
def H(b): return hashlib.sha256(b).digest()
def hm(k, d): return hmac.new(k, d, hashlib.sha256).digest()
def hkdf(ck, ikm):
    t = hm(ck, ikm); o1 = hm(t, b'\x01'); o2 = hm(t, o1 + b'\x02'); return o1, o2
def enc(k, n, ad, pt): return ChaCha20Poly1305(k).encrypt(b'\0'*4 + struct.pack('<Q', n), pt, ad)
def dec(k, n, ad, ct): return ChaCha20Poly1305(k).decrypt(b'\0'*4 + struct.pack('<Q', n), ct, ad)

class SS:
    def __init__(s, prologue):
        s.h = b'Noise_XX_25519_ChaChaPoly_SHA256'; s.ck = s.h; s.k = None; s.n = 0
        s.mh(prologue)
    def mh(s, d): s.h = H(s.h + d)
    def mk(s, d): s.ck, s.k = hkdf(s.ck, d); s.n = 0
    def eah(s, pt):
        ct = pt if s.k is None else enc(s.k, s.n, s.h, pt)
        if s.k is not None: s.n += 1
        s.mh(ct); return ct

ie, re_ = v['initiator_ephemeral_private'], v['responder_ephemeral_private']
is_, rs = v['initiator_static_private'], v['responder_static_private']
ss = SS(v['prologue'])
# message 1
m1 = pub(ie); ss.mh(pub(ie)); m1 += ss.eah(b'')
# message 2
m2 = pub(re_); ss.mh(pub(re_)); ss.mk(dh(ie, pub(re_)))
m2 += ss.eah(pub(rs)); ss.mk(dh(ie, pub(rs)))
m2 += ss.eah(v['responder_payload'])
# message 3
m3 = ss.eah(pub(is_)); ss.mk(dh(is_, pub(re_)))
m3 += ss.eah(v['initiator_payload'])
k1, k2 = hkdf(ss.ck, b'')
rec = lambda m: struct.pack('>H', len(m)) + m
ok = ss.h == v['handshake_hash']
print('handshake_hash', 'OK' if ok else 'MISMATCH')
for name, got in [('message_1', rec(m1)), ('message_2', rec(m2)), ('message_3', rec(m3)),
                  ('initiator_transport_0', rec(enc(k1, 0, b'', b'\x01hi'))),
                  ('responder_transport_0', rec(enc(k2, 0, b'', b'\x01re: hi')))]:
    same = got == v[name]; ok &= same
    print(name, 'OK' if same else 'MISMATCH')
# identity binding: sig over "meshd/noise-static/v1\0" || static pub, inside the CBOR payload
for side, seed, st in [('initiator', v['initiator_identity_seed'], is_), ('responder', v['responder_identity_seed'], rs)]:
    sk = Ed25519PrivateKey.from_private_bytes(seed)
    sig = sk.sign(b'meshd/noise-static/v1\x00' + pub(st))
    idpub = sk.public_key().public_bytes(S.Encoding.Raw, S.PublicFormat.Raw)
    p = v[side + '_payload']
    same = sig in p and idpub in p; ok &= same
    print(side, 'binding', 'OK' if same else 'MISMATCH')
sys.exit(0 if ok else 1)
