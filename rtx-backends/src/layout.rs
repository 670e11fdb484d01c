//! Layouts: sizes, strides and an offset into shared storage, so views copy nothing.
//!
//! Invariant: a layout never addresses past its storage; every view constructor below keeps
//! that by construction (it only narrows, reorders, or repeats with stride 0).

/// The highest rank a tensor may have.
pub const MAX_RANK: usize = 6;

/// How a tensor's logical elements map onto its storage (row-major logical order).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct Layout {
    rank: u8,
    dims: [usize; MAX_RANK],
    strides: [usize; MAX_RANK],
    offset: usize,
}

impl Layout {
    /// A dense row-major layout of the given sizes at offset 0.
    pub fn contiguous(dims: &[usize]) -> Self {
        assert!(
            dims.len() <= MAX_RANK,
            "rank {} exceeds {MAX_RANK}",
            dims.len()
        );
        let mut l = Layout {
            rank: dims.len() as u8,
            dims: [0; MAX_RANK],
            strides: [0; MAX_RANK],
            offset: 0,
        };
        let mut stride = 1;
        for i in (0..dims.len()).rev() {
            l.dims[i] = dims[i];
            l.strides[i] = stride;
            stride *= dims[i];
        }
        l
    }

    /// A layout from explicit sizes, strides and offset.
    pub fn new(dims: &[usize], strides: &[usize], offset: usize) -> Self {
        assert_eq!(dims.len(), strides.len());
        let mut l = Layout::contiguous(dims);
        l.strides[..strides.len()].copy_from_slice(strides);
        l.offset = offset;
        l
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// The sizes.
    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank()]
    }

    /// The strides, in elements.
    pub fn strides(&self) -> &[usize] {
        &self.strides[..self.rank()]
    }

    /// The offset of the first element, in elements.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The number of logical elements.
    pub fn numel(&self) -> usize {
        self.dims().iter().product()
    }

    /// Whether the elements are dense and row-major from `offset` (size-1 dims may have any
    /// stride).
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1;
        for i in (0..self.rank()).rev() {
            if self.dims[i] != 1 && self.strides[i] != expected {
                return false;
            }
            expected *= self.dims[i];
        }
        true
    }

    /// The storage range of a contiguous layout, or `None` if it is not contiguous.
    pub fn contiguous_range(&self) -> Option<std::ops::Range<usize>> {
        self.is_contiguous()
            .then(|| self.offset..self.offset + self.numel())
    }

    /// The number of storage elements the layout must be able to reach (max offset + 1).
    pub fn required_len(&self) -> usize {
        if self.numel() == 0 {
            return 0;
        }
        self.offset
            + self
                .dims()
                .iter()
                .zip(self.strides())
                .map(|(&d, &s)| (d - 1) * s)
                .sum::<usize>()
            + 1
    }

    /// The same sizes and strides starting at another offset.
    pub fn with_offset(mut self, offset: usize) -> Layout {
        self.offset = offset;
        self
    }

    /// Reorders the axes: output axis `i` is input axis `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Layout {
        assert_eq!(perm.len(), self.rank(), "permute: wrong number of axes");
        let mut l = *self;
        for (i, &p) in perm.iter().enumerate() {
            l.dims[i] = self.dims[p];
            l.strides[i] = self.strides[p];
        }
        l
    }

    /// Swaps two axes.
    pub fn transpose(&self, a: usize, b: usize) -> Layout {
        let mut l = *self;
        l.dims.swap(a, b);
        l.strides.swap(a, b);
        l
    }

    /// Broadcasts to `dims`: missing leading axes and size-1 axes repeat with stride 0.
    /// Returns `None` when a non-1 size differs from its target.
    pub fn broadcast_to(&self, dims: &[usize]) -> Option<Layout> {
        let r = self.rank();
        if dims.len() < r || dims.len() > MAX_RANK {
            return None;
        }
        let lead = dims.len() - r;
        let mut strides = [0; MAX_RANK];
        for (i, &d) in dims.iter().enumerate().skip(lead) {
            let own = self.dims[i - lead];
            if own == d {
                strides[i] = if d == 1 { 0 } else { self.strides[i - lead] };
            } else if own == 1 {
                strides[i] = 0;
            } else {
                return None;
            }
        }
        Some(Layout::new(dims, &strides[..dims.len()], self.offset))
    }

    /// Keeps `len` entries of axis `axis` starting at `start`.
    pub fn narrow(&self, axis: usize, start: usize, len: usize) -> Layout {
        assert!(start + len <= self.dims[axis], "narrow out of range");
        let mut l = *self;
        l.dims[axis] = len;
        if len > 0 {
            l.offset += start * self.strides[axis];
        }
        l
    }

    /// The same elements viewed with new sizes, when that needs no copy (the layout is
    /// contiguous); `None` means the caller must copy first.
    pub fn reshape(&self, dims: &[usize]) -> Option<Layout> {
        if dims.iter().product::<usize>() != self.numel() || !self.is_contiguous() {
            return None;
        }
        let mut l = Layout::contiguous(dims);
        l.offset = self.offset;
        Some(l)
    }

    /// Storage offsets of all elements in logical row-major order, starting at logical index
    /// `start`.
    pub fn offsets_from(&self, start: usize) -> StridedOffsets {
        StridedOffsets::new(self, start)
    }
}

/// Iterator over the storage offsets of a layout in logical order.
pub struct StridedOffsets {
    rank: usize,
    dims: [usize; MAX_RANK],
    strides: [usize; MAX_RANK],
    index: [usize; MAX_RANK],
    next: usize,
    remaining: usize,
}

impl StridedOffsets {
    fn new(l: &Layout, start: usize) -> Self {
        let rank = l.rank();
        let mut index = [0; MAX_RANK];
        let mut rest = start;
        let mut next = l.offset;
        for i in (0..rank).rev() {
            let d = l.dims[i].max(1);
            index[i] = rest % d;
            rest /= d;
            next += index[i] * l.strides[i];
        }
        StridedOffsets {
            rank,
            dims: l.dims,
            strides: l.strides,
            index,
            next,
            remaining: l.numel().saturating_sub(start),
        }
    }
}

impl Iterator for StridedOffsets {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let out = self.next;
        // Odometer step: bump the last axis, carrying into earlier ones.
        let mut i = self.rank;
        while i > 0 {
            i -= 1;
            self.index[i] += 1;
            if self.index[i] < self.dims[i] {
                self.next += self.strides[i];
                return Some(out);
            }
            self.next -= (self.dims[i] - 1) * self.strides[i];
            self.index[i] = 0;
        }
        Some(out)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposed_offsets_walk_columns() {
        let l = Layout::contiguous(&[2, 3]).transpose(0, 1);
        assert!(!l.is_contiguous());
        let got: Vec<_> = l.offsets_from(0).collect();
        assert_eq!(got, vec![0, 3, 1, 4, 2, 5]);
        let tail: Vec<_> = l.offsets_from(4).collect();
        assert_eq!(tail, vec![2, 5]);
    }

    #[test]
    fn broadcast_repeats_with_zero_stride() {
        let l = Layout::contiguous(&[3]).broadcast_to(&[2, 3]).unwrap();
        assert_eq!(l.strides(), &[0, 1]);
        assert_eq!(
            l.offsets_from(0).collect::<Vec<_>>(),
            vec![0, 1, 2, 0, 1, 2]
        );
        assert!(Layout::contiguous(&[2]).broadcast_to(&[3]).is_none());
        let col = Layout::contiguous(&[2, 1]).broadcast_to(&[2, 3]).unwrap();
        assert_eq!(
            col.offsets_from(0).collect::<Vec<_>>(),
            vec![0, 0, 0, 1, 1, 1]
        );
    }

    #[test]
    fn narrow_moves_the_offset() {
        let l = Layout::contiguous(&[4, 5]).narrow(1, 2, 2);
        assert_eq!(
            l.offsets_from(0).collect::<Vec<_>>(),
            vec![2, 3, 7, 8, 12, 13, 17, 18]
        );
        assert_eq!(l.required_len(), 19);
    }
}
