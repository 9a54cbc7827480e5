// SPDX-License-Identifier: GPL-2.0

//! XXH64, the 64-bit xxHash: the digest a cache file carries of its
//! section, so that reading it back checks every byte at a few
//! instructions per 8 bytes instead of decoding every row.
//!
//! Not cryptographic, and it need not be: it detects a damaged file (a
//! bad sector, a file written by hand or by another tool), not a forged
//! one.  Whoever can write into the cache directory (ours, mode 0700) can
//! already register anything for our processes; the module validates
//! every section again at registration.  Implemented from the xxHash
//! specification (`doc/xxhash_spec.md`, "XXH64"), without a dependency.

const P1: u64 = 0x9e37_79b1_85eb_ca87;
const P2: u64 = 0xc2b2_ae3d_27d4_eb4f;
const P3: u64 = 0x1656_67b1_9e37_79f9;
const P4: u64 = 0x85eb_ca77_c2b2_ae63;
const P5: u64 = 0x27d4_eb2f_1656_67c5;

fn round(acc: u64, lane: u64) -> u64 {
    acc.wrapping_add(lane.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

fn merge(acc: u64, lane: u64) -> u64 {
    (acc ^ round(0, lane)).wrapping_mul(P1).wrapping_add(P4)
}

fn le64(bytes: &[u8]) -> u64 {
    bytes
        .first_chunk::<8>()
        .map_or(0, |b| u64::from_le_bytes(*b))
}

fn le32(bytes: &[u8]) -> u64 {
    bytes
        .first_chunk::<4>()
        .map_or(0, |b| u64::from(u32::from_le_bytes(*b)))
}

/// The XXH64 digest of `data` with `seed`.
pub fn xxh64(data: &[u8], seed: u64) -> u64 {
    let mut stripes = data.chunks_exact(32);
    let mut h = if data.len() >= 32 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        for stripe in &mut stripes {
            for (lane, word) in v.iter_mut().zip(stripe.chunks_exact(8)) {
                *lane = round(*lane, le64(word));
            }
        }
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for lane in v {
            h = merge(h, lane);
        }
        h
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(data.len() as u64);
    let mut words = stripes.remainder().chunks_exact(8);
    for word in &mut words {
        h ^= round(0, le64(word));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
    }
    let mut rest = words.remainder();
    if rest.len() >= 4 {
        h ^= le32(rest).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = rest.get(4..).unwrap_or_default();
    }
    for &byte in rest {
        h ^= u64::from(byte).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        // Published XXH64 values (seed 0): the empty input, and inputs that
        // end in each of the tail paths (bytes, a 4-byte word, stripes).
        assert_eq!(xxh64(b"", 0), 0xef46_db37_51d8_e999);
        assert_eq!(xxh64(b"a", 0), 0xd24e_c4f1_a98c_6e5b);
        assert_eq!(xxh64(b"abc", 0), 0x44bc_2cf5_ad77_0999);
        assert_eq!(
            xxh64(b"Nobody inspects the spammish repetition", 0),
            0xfbce_a83c_8a37_8bf1
        );
    }

    #[test]
    fn every_byte_and_the_seed_count() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let d = xxh64(&data, 42);
        assert_ne!(d, xxh64(&data, 43));
        for i in 0..data.len() {
            let mut bad = data.clone();
            bad[i] ^= 1;
            assert_ne!(xxh64(&bad, 42), d, "byte {i}");
        }
        assert_ne!(xxh64(&data[..999], 42), d);
    }
}
