//! The masks and indexing of [`StaticOps`](super::StaticOps) (`masked_fill`, `where_cond`,
//! `tril`, `triu`, `index_select`, `gather`): the backwards of the tape's rules, through the
//! same functions (`masked_fill_raw`, `index_select_back`, `gather_back`).

/// Expands to the mask and indexing methods of [`StaticOps`](super::StaticOps), inside its
/// declaration in `mod.rs`, where the names they use are imported. (rustfmt does not format
/// macro bodies: keep this one in rustfmt's style by hand.)
macro_rules! index_methods {
    () => {
        /// [`Tensor::masked_fill`] with its backward: the gradient, zero where the mask holds.
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let x: Tensor<Rank1<3>> = Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu);
        /// let mask: Tensor<Rank1<3>, bool> =
        ///     Tensor::from_array([false, true, false], Device::Cpu);
        /// let (y, backward) = StaticOps::masked_fill(&x, &mask, -1.0);
        /// assert_eq!(y.to_vec(), vec![1.0, -1.0, 3.0]);
        /// assert_eq!(backward(&x, [true]).unwrap().to_vec(), vec![1.0, 0.0, 3.0]);
        /// ```
        ///
        /// # Panics
        /// As [`Tensor::masked_fill`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn masked_fill<C>(
            &self,
            mask: &Tensor<C, bool>,
            value: E,
        ) -> (
            Tensor<S, E>,
            impl FnOnce(&Tensor<S, E>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E, C>,
        )
        where
            C: BroadcastShapes<S, Output = S>,
        {
            let x = self.tensor();
            let y = x.detach().masked_fill(mask, value);
            let mask = mask_at(mask, x);
            (y, move |dy: &Tensor<S, E>, [need]: [bool; 1]| {
                wants::<E>(need).then(|| ok(dy.try_where_grad(&mask, false)))
            })
        }

        /// [`Tensor::where_cond`] with its backward: the gradient goes to `self` where `cond`
        /// holds and to `other` (summed to its shape) elsewhere.
        ///
        /// The backward is boxed, unlike the other methods': `other` may be a reference, and a
        /// closure type would capture its lifetime (an `impl Trait` must name every type
        /// parameter), tying the backward to the borrow of a tensor the forward may drop.
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let x: Tensor<Rank1<2>> = Tensor::from_array([1.0, 2.0], Device::Cpu);
        /// let cond: Tensor<Rank1<2>, bool> = Tensor::from_array([true, false], Device::Cpu);
        /// let (y, backward) = StaticOps::where_cond(&x, &cond, 7.0);
        /// assert_eq!(y.to_vec(), vec![1.0, 7.0]);
        /// let (dx, dother) = backward(&y.ones_like(), [true, true]);
        /// assert_eq!(dx.unwrap().to_vec(), vec![1.0, 0.0]);
        /// assert_eq!(dother.unwrap().item(), 1.0);
        /// ```
        ///
        /// # Panics
        /// As [`Tensor::where_cond`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn where_cond<C, R: Operand<E>>(
            &self,
            cond: &Tensor<C, bool>,
            other: R,
        ) -> (
            Tensor<S, E>,
            Box<
                dyn FnOnce(
                    &Tensor<S, E>,
                    [bool; 2],
                ) -> (Option<Tensor<S, E>>, Option<Tensor<R::Shape, E>>),
            >,
        )
        where
            C: BroadcastShapes<S, Output = S>,
            R::Shape: BroadcastShapes<S, Output = S>,
        {
            let x = self.tensor();
            let other = ok(other.into_tensor(x.device())).detach();
            let y = x.detach().where_cond(cond, &other);
            let (mask, other_shape) = (mask_at(cond, x), other.shape());
            let backward = move |dy: &Tensor<S, E>, [need_x, need_o]: [bool; 2]| {
                let dx = wants::<E>(need_x).then(|| ok(dy.try_where_grad(&mask, true)));
                let dother = wants::<E>(need_o).then(|| {
                    ok(dy
                        .try_where_grad(&mask, false)
                        .and_then(|m| sum_to(&m, other_shape)))
                });
                (dx, dother)
            };
            (y, Box::new(backward))
        }

        /// [`Tensor::tril`] with its backward: the gradient's own lower triangle.
        #[allow(clippy::type_complexity)]
        fn tril(
            &self,
            k: i64,
        ) -> (
            Tensor<S, E>,
            impl FnOnce(&Tensor<S, E>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E>,
        )
        where
            S: HasAxis<1>,
        {
            let y = self.tensor().detach().tril(k);
            (y, move |dy: &Tensor<S, E>, [need]: [bool; 1]| {
                wants::<E>(need).then(|| dy.tril(k))
            })
        }

        /// [`Tensor::triu`] with its backward: the gradient's own upper triangle.
        #[allow(clippy::type_complexity)]
        fn triu(
            &self,
            k: i64,
        ) -> (
            Tensor<S, E>,
            impl FnOnce(&Tensor<S, E>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E>,
        )
        where
            S: HasAxis<1>,
        {
            let y = self.tensor().detach().triu(k);
            (y, move |dy: &Tensor<S, E>, [need]: [bool; 1]| {
                wants::<E>(need).then(|| dy.triu(k))
            })
        }

        /// [`Tensor::index_select`] with its backward: the gradient's slices added into zeros at
        /// the indices (repeated indices accumulate). The indices take no gradient.
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let table: Tensor<Rank2<3, 1>> = Tensor::from_array([[1.0], [2.0], [3.0]], Device::Cpu);
        /// let ids: Tensor<Rank1<3>, i64> = Tensor::from_array([2, 0, 2], Device::Cpu);
        /// let (rows, backward) = StaticOps::index_select::<0, _>(&table, &ids);
        /// assert_eq!(rows.to_vec(), vec![3.0, 1.0, 3.0]);
        /// assert_eq!(backward(&rows.ones_like(), [true]).unwrap().to_vec(), vec![1.0, 0.0, 2.0]);
        /// ```
        ///
        /// # Panics
        /// As [`Tensor::index_select`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn index_select<const I: usize, D: Dim>(
            &self,
            indices: &Tensor<(D,), i64>,
        ) -> (
            Tensor<Replaced<S, I, D>, E>,
            impl FnOnce(&Tensor<Replaced<S, I, D>, E>, [bool; 1]) -> Option<Tensor<S, E>>
            + use<Self, S, E, I, D>,
        )
        where
            S: ReduceAxis<I>,
            <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
        {
            let x = self.tensor();
            let (orig, idx) = (x.shape(), indices.clone());
            let y = x.detach().index_select::<I, D>(indices);
            (y, move |dy: &Tensor<_, E>, [need]: [bool; 1]| {
                wants::<E>(need).then(|| ok(index_select_back::<I, S, D, E>(dy, orig, &idx)))
            })
        }

        /// [`Tensor::gather`] with its backward: the gradient scatter-added into zeros.
        ///
        /// # Panics
        /// As [`Tensor::gather`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn gather<const I: usize, S2: Shape>(
            &self,
            index: &Tensor<S2, i64>,
        ) -> (
            Tensor<S2, E>,
            impl FnOnce(&Tensor<S2, E>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E, I, S2>,
        )
        where
            S: HasAxis<I>,
        {
            let x = self.tensor();
            let (orig, idx) = (x.shape(), index.clone());
            let y = x.detach().gather::<I, S2>(index);
            (y, move |dy: &Tensor<S2, E>, [need]: [bool; 1]| {
                wants::<E>(need).then(|| ok(gather_back::<I, S, S2, E>(dy, orig, &idx)))
            })
        }
    };
}

pub(super) use index_methods;
