// SPDX-License-Identifier: GPL-2.0

//! Hand-built `.eh_frame` sections for the hostile-input tests.

/// `DW_EH_PE_pcrel | DW_EH_PE_sdata4`, what GCC and ld use.
pub const PCREL_SDATA4: u8 = 0x1b;
/// `DW_EH_PE_absptr | DW_EH_PE_udata8`: 64-bit absolute start and length.
pub const UDATA8: u8 = 0x04;

/// An `.eh_frame` under construction, at address `addr`.
pub struct EhB {
    pub bytes: Vec<u8>,
    pub addr: u64,
}

fn uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

impl EhB {
    pub fn new(addr: u64) -> Self {
        EhB {
            bytes: Vec::new(),
            addr,
        }
    }

    fn entry(&mut self, body: Vec<u8>) -> usize {
        let off = self.bytes.len();
        let mut body = body;
        while (body.len() + 4) % 8 != 0 {
            body.push(0); // DW_CFA_nop
        }
        self.bytes
            .extend_from_slice(&(body.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(&body);
        off
    }

    /// A CIE: "zR", code alignment 1, data alignment -8, RA column `ra`,
    /// FDE pointer encoding `enc`, then `instrs`; `signal` adds "S".
    pub fn cie_with(&mut self, enc: u8, ra: u8, signal: bool, instrs: &[u8]) -> usize {
        self.cie_aligned(1, enc, ra, signal, instrs)
    }

    /// [`EhB::cie_with`] with code alignment factor `code_align`.
    pub fn cie_aligned(
        &mut self,
        code_align: u64,
        enc: u8,
        ra: u8,
        signal: bool,
        instrs: &[u8],
    ) -> usize {
        let mut b = vec![0, 0, 0, 0, 1];
        b.extend_from_slice(if signal { b"zRS\0" } else { b"zR\0" });
        uleb(&mut b, code_align);
        b.push(0x78); // data alignment factor -8
        b.push(ra);
        b.push(1); // augmentation data length
        b.push(enc);
        b.extend_from_slice(instrs);
        self.entry(b)
    }

    /// The usual x86-64 CIE: CFA = rsp + 8, RA at CFA-8.
    pub fn cie(&mut self) -> usize {
        self.cie_with(PCREL_SDATA4, 16, false, &[0x0c, 7, 8, 0x90, 1])
    }

    /// The usual AArch64 CIE (GCC's): code alignment 4, RA column x30,
    /// CFA = sp + 0, RA still in x30.
    pub fn cie_aarch64(&mut self) -> usize {
        self.cie_aligned(4, PCREL_SDATA4, 30, false, &[0x0c, 31, 0])
    }

    /// An FDE of the CIE at `cie`, for `[start, start + len)`, whose
    /// pointers use `enc` (as its CIE says).
    pub fn fde_with(&mut self, cie: usize, enc: u8, start: u64, len: u64, instrs: &[u8]) -> usize {
        let off = self.bytes.len();
        let mut b = Vec::new();
        b.extend_from_slice(&((off + 4 - cie) as u32).to_le_bytes());
        match enc {
            PCREL_SDATA4 => {
                let field = self.addr + off as u64 + 8;
                b.extend_from_slice(&(start.wrapping_sub(field) as u32).to_le_bytes());
                b.extend_from_slice(&(len as u32).to_le_bytes());
            }
            _ => {
                b.extend_from_slice(&start.to_le_bytes());
                b.extend_from_slice(&len.to_le_bytes());
            }
        }
        uleb(&mut b, 0); // augmentation data length
        b.extend_from_slice(instrs);
        self.entry(b)
    }

    pub fn fde(&mut self, cie: usize, start: u64, len: u64, instrs: &[u8]) -> usize {
        self.fde_with(cie, PCREL_SDATA4, start, len, instrs)
    }

    /// The section so far with a zero terminator, the builder kept.
    pub fn bytes_with_terminator(&self) -> Vec<u8> {
        let mut out = self.bytes.clone();
        out.extend_from_slice(&[0, 0, 0, 0]);
        out
    }

    /// The section with its zero terminator.
    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.extend_from_slice(&[0, 0, 0, 0]);
        self.bytes
    }
}

/// An `.eh_frame_hdr` at `hdr_addr` for an `.eh_frame` at `eh_addr`, with
/// a search table of `(initial location, FDE address)` pairs, both
/// `DW_EH_PE_datarel | DW_EH_PE_sdata4` as ld writes them.
pub fn eh_frame_hdr(hdr_addr: u64, eh_addr: u64, table: &[(u64, u64)]) -> Vec<u8> {
    let mut b = vec![1, PCREL_SDATA4, 0x03, 0x3b];
    let field = hdr_addr + 4;
    b.extend_from_slice(&(eh_addr.wrapping_sub(field) as u32).to_le_bytes());
    b.extend_from_slice(&(table.len() as u32).to_le_bytes());
    for &(loc, fde) in table {
        b.extend_from_slice(&(loc.wrapping_sub(hdr_addr) as u32).to_le_bytes());
        b.extend_from_slice(&(fde.wrapping_sub(hdr_addr) as u32).to_le_bytes());
    }
    b
}
