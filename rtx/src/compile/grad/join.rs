//! The joins and splits of [`StaticOps`](super::StaticOps) (`concat`, `cat`, `stack`,
//! `split2`): each input gets its slice of the gradient, a view, as on the tape; `split2`'s
//! backward joins its parts' gradients back.

/// Expands to the join and split methods of [`StaticOps`](super::StaticOps), inside its
/// declaration in `mod.rs`, where the names they use are imported. (rustfmt does not format
/// macro bodies: keep this one in rustfmt's style by hand.)
macro_rules! join_methods {
    () => {
        /// [`Tensor::concat`] of two tensors of one shape type with its backward: each input
        /// gets its slice of the gradient (a view). (A `concat` of two different shape types
        /// cannot be mirrored: the second type is an `impl Trait` argument, which the backward's
        /// type could not name.)
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let a: Tensor<(usize,)> = Tensor::from_vec(vec![1.0, 2.0], (2,), Device::Cpu);
        /// let b: Tensor<(usize,)> = Tensor::from_vec(vec![3.0], (1,), Device::Cpu);
        /// let (c, backward) = StaticOps::concat::<0, Const<3>>(&a, &b);
        /// assert_eq!(c.to_vec(), vec![1.0, 2.0, 3.0]);
        /// let (da, db) = backward(&c, [true, true]);
        /// assert_eq!((da.unwrap().to_vec(), db.unwrap().to_vec()), (vec![1.0, 2.0], vec![3.0]));
        /// ```
        ///
        /// # Panics
        /// As [`Tensor::concat`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn concat<const I: usize, D: Dim>(
            &self,
            other: &Tensor<S, E>,
        ) -> (
            Tensor<Replaced<S, I, D>, E>,
            impl FnOnce(
                &Tensor<Replaced<S, I, D>, E>,
                [bool; 2],
            ) -> (Option<Tensor<S, E>>, Option<Tensor<S, E>>)
            + use<Self, S, E, I, D>,
        )
        where
            S: ReduceAxis<I> + ConcatWith<S, I>,
            <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
        {
            let x = self.tensor();
            let y = x.detach().concat::<I, D>(&other.detach());
            let (sa, sb, split) = (x.shape(), other.shape(), x.dims()[I]);
            (y, move |dy: &Tensor<_, E>, [need_a, need_b]: [bool; 2]| {
                (
                    wants::<E>(need_a).then(|| slice_of(dy, sa, I, 0, false)),
                    wants::<E>(need_b).then(|| slice_of(dy, sb, I, split, false)),
                )
            })
        }

        /// [`Tensor::cat`] with its backward: each input gets its slice of the gradient (a view).
        /// `need` has one flag per input, and the backward one entry per input.
        ///
        /// # Panics
        /// As [`Tensor::cat`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn cat<const I: usize, D: Dim>(
            tensors: &[&Self],
        ) -> (
            Tensor<Replaced<S, I, D>, E>,
            impl FnOnce(&Tensor<Replaced<S, I, D>, E>, &[bool]) -> Vec<Option<Tensor<S, E>>>
            + use<Self, S, E, I, D>,
        )
        where
            Self: Sized,
            S: ReduceAxis<I>,
            <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
        {
            let parts: Vec<Tensor<S, E>> = tensors.iter().map(|t| t.tensor().detach()).collect();
            let refs: Vec<&Tensor<S, E>> = parts.iter().collect();
            let y = Tensor::cat::<I, D>(&refs);
            let shapes: Vec<S> = parts.iter().map(|t| t.shape()).collect();
            (y, move |dy: &Tensor<_, E>, need: &[bool]| {
                let mut start = 0;
                shapes
                    .iter()
                    .enumerate()
                    .map(|(k, &shape)| {
                        let part = wants::<E>(need.get(k).copied().unwrap_or(false))
                            .then(|| slice_of(dy, shape, I, start, false));
                        start += shape.dims()[I];
                        part
                    })
                    .collect()
            })
        }

        /// [`Tensor::stack`] with its backward: each input gets its slice of the gradient along
        /// the new axis (a view).
        ///
        /// # Panics
        /// As [`Tensor::stack`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn stack<const I: usize, const N: usize>(
            tensors: [&Self; N],
        ) -> (
            Tensor<<S as InsertAxis<I, Const<N>>>::Output, E>,
            impl FnOnce(
                &Tensor<<S as InsertAxis<I, Const<N>>>::Output, E>,
                [bool; N],
            ) -> [Option<Tensor<S, E>>; N]
            + use<Self, S, E, I, N>,
        )
        where
            Self: Sized,
            S: InsertAxis<I, Const<N>>,
        {
            let parts = tensors.map(|t| t.tensor().detach());
            let y = Tensor::stack::<I, N>(parts.each_ref());
            let shape = parts[0].shape();
            (y, move |dy: &Tensor<_, E>, need: [bool; N]| {
                let mut k = 0;
                need.map(|n| {
                    let part = wants::<E>(n).then(|| slice_of(dy, shape, I, k, true));
                    k += 1;
                    part
                })
            })
        }

        /// [`Tensor::split2`] with its backward, which takes the gradients of the two parts (either
        /// may be missing, as when a part is not used) and joins them, zeros for a missing one.
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let x: Tensor<Rank1<3>> = Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu);
        /// let ((l, r), backward) = StaticOps::split2::<0, Const<1>, Const<2>>(&x, Const, Const);
        /// assert_eq!((l.to_vec(), r.to_vec()), (vec![1.0], vec![2.0, 3.0]));
        /// let dx = backward((None, Some(&r)), [true]).unwrap();
        /// assert_eq!(dx.to_vec(), vec![0.0, 2.0, 3.0]);
        /// ```
        ///
        /// # Panics
        /// As [`Tensor::split2`] does, and when the device fails in the backward.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn split2<const I: usize, A: Dim, B: Dim>(
            &self,
            a: A,
            b: B,
        ) -> (
            (Tensor<Replaced<S, I, A>, E>, Tensor<Replaced<S, I, B>, E>),
            impl FnOnce(
                (
                    Option<&Tensor<Replaced<S, I, A>, E>>,
                    Option<&Tensor<Replaced<S, I, B>, E>>,
                ),
                [bool; 1],
            ) -> Option<Tensor<S, E>>
            + use<Self, S, E, I, A, B>,
        )
        where
            S: ReduceAxis<I>,
            <S as ReduceAxis<I>>::Reduced: InsertAxis<I, A> + InsertAxis<I, B>,
        {
            let x = self.tensor();
            let device = x.device();
            let parts = x.detach().split2::<I, A, B>(a, b);
            let (orig, sa, sb) = (x.shape(), parts.0.shape(), parts.1.shape());
            let backward = move |(ga, gb): (
                Option<&Tensor<Replaced<S, I, A>, E>>,
                Option<&Tensor<Replaced<S, I, B>, E>>,
            ),
                                 [need]: [bool; 1]| {
                if !wants::<E>(need) || (ga.is_none() && gb.is_none()) {
                    return None;
                }
                // The parts cover the axis without overlap, so the gradient is their gradients
                // joined back along it.
                let ga = ga
                    .cloned()
                    .unwrap_or_else(|| Tensor::full(sa, E::default(), device));
                let gb = gb
                    .cloned()
                    .unwrap_or_else(|| Tensor::full(sb, E::default(), device));
                let joined = Storage::concat(
                    &[(ga.storage(), ga.layout()), (gb.storage(), gb.layout())],
                    I,
                );
                Some(Tensor::from_storage(ok(joined.map_err(Into::into)), orig))
            };
            (parts, backward)
        }
    };
}

pub(super) use join_methods;
