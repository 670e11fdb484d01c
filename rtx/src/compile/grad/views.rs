//! The views of [`StaticOps`](super::StaticOps) (`t`, `transpose`, `permute`, `reshape`,
//! `flatten`, `squeeze`, `unsqueeze`, `broadcast_to`, `expand`, `narrow`, `slice`,
//! `contiguous`) and `cast`: each backward hands the gradient back through the inverse view
//! (`sum_to` for a broadcast, `narrow_back` for a narrow), as the tape's view rules do.

/// Expands to the view methods of [`StaticOps`](super::StaticOps), inside its
/// declaration in `mod.rs`, where the names they use are imported. (rustfmt does not format
/// macro bodies: keep this one in rustfmt's style by hand.)
macro_rules! view_methods {
    () => {
        /// [`Tensor::t`] (the transpose of a matrix, a view) with its backward.
        #[allow(clippy::type_complexity)]
        fn t(
            &self,
        ) -> (
            Tensor<<S as SwapAxes<0, 1>>::Output, E>,
            impl FnOnce(
                &Tensor<<S as SwapAxes<0, 1>>::Output, E>,
                [bool; 1],
            ) -> Option<Tensor<S, E>>
            + use<Self, S, E>,
        )
        where
            S: SwapAxes<0, 1>,
        {
            self.transpose::<0, 1>()
        }

        /// [`Tensor::transpose`] with its backward: the gradient swapped back (a view).
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let x: Tensor<Rank2<1, 2>> = Tensor::from_array([[1.0, 2.0]], Device::Cpu);
        /// let (y, backward) = StaticOps::transpose::<0, 1>(&x);
        /// assert_eq!(y.dims(), &[2, 1]);
        /// assert_eq!(backward(&y, [true]).unwrap().to_vec(), vec![1.0, 2.0]);
        /// ```
        #[allow(clippy::type_complexity)]
        fn transpose<const A: usize, const B: usize>(
            &self,
        ) -> (
            Tensor<<S as SwapAxes<A, B>>::Output, E>,
            impl FnOnce(
                &Tensor<<S as SwapAxes<A, B>>::Output, E>,
                [bool; 1],
            ) -> Option<Tensor<S, E>>
            + use<Self, S, E, A, B>,
        )
        where
            S: SwapAxes<A, B>,
        {
            let x = self.tensor();
            let orig = x.shape();
            (
                x.detach().transpose::<A, B>(),
                move |dy: &Tensor<_, E>, [need]: [bool; 1]| {
                    wants::<E>(need).then(|| dy.view(dy.layout().transpose(A, B), orig))
                },
            )
        }

        /// [`Tensor::permute`] with its backward: the gradient permuted back (a view).
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let x: Tensor<Rank3<2, 3, 4>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
        /// let (y, backward) = StaticOps::permute::<Axes3<2, 0, 1>>(&x);
        /// assert_eq!(y.dims(), &[4, 2, 3]);
        /// assert_eq!(backward(&y, [true]).unwrap().dims(), &[2, 3, 4]);
        /// ```
        #[allow(clippy::type_complexity)]
        fn permute<P>(
            &self,
        ) -> (
            Tensor<<S as PermuteAxes<P>>::Output, E>,
            impl FnOnce(
                &Tensor<<S as PermuteAxes<P>>::Output, E>,
                [bool; 1],
            ) -> Option<Tensor<S, E>>
            + use<Self, S, E, P>,
        )
        where
            S: PermuteAxes<P>,
        {
            let x = self.tensor();
            let orig = x.shape();
            (
                x.detach().permute::<P>(),
                move |dy: &Tensor<_, E>, [need]: [bool; 1]| {
                    let perm = <S as PermuteAxes<P>>::PERM;
                    let mut inverse = vec![0; perm.len()];
                    for (i, &p) in perm.iter().enumerate() {
                        inverse[p] = i;
                    }
                    wants::<E>(need).then(|| dy.view(dy.layout().permute(&inverse), orig))
                },
            )
        }

        /// [`Tensor::reshape`] with its backward: the gradient reshaped back.
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let x: Tensor<Rank2<2, 3>> = Tensor::ones((Const, Const), Device::Cpu);
        /// let (y, backward) = StaticOps::reshape(&x, (Const::<6>,));
        /// assert_eq!(backward(&y, [true]).unwrap().dims(), &[2, 3]);
        /// ```
        ///
        /// # Panics
        /// As [`Tensor::reshape`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn reshape<T: Shape>(
            &self,
            shape: T,
        ) -> (
            Tensor<T, E>,
            impl FnOnce(&Tensor<T, E>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E, T>,
        ) {
            let x = self.tensor();
            let orig = x.shape();
            (
                x.detach().reshape(shape),
                move |dy: &Tensor<T, E>, [need]: [bool; 1]| {
                    wants::<E>(need).then(|| ok(dy.reshape_unchecked(orig)))
                },
            )
        }

        /// [`Tensor::flatten`] with its backward: the gradient reshaped back.
        ///
        /// # Panics
        /// As [`Tensor::flatten`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn flatten<const START: usize, const END: usize, T: Shape>(
            &self,
        ) -> (
            Tensor<T, E>,
            impl FnOnce(&Tensor<T, E>, [bool; 1]) -> Option<Tensor<S, E>>
            + use<Self, S, E, START, END, T>,
        ) {
            let x = self.tensor();
            let orig = x.shape();
            let y = x.detach().flatten::<START, END, T>();
            (y, move |dy: &Tensor<T, E>, [need]: [bool; 1]| {
                wants::<E>(need).then(|| ok(dy.reshape_unchecked(orig)))
            })
        }

        /// [`Tensor::squeeze`] with its backward: the gradient reshaped back.
        ///
        /// # Panics
        /// As [`Tensor::squeeze`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn squeeze<const I: usize>(
            &self,
        ) -> (
            Tensor<Reduced<S, I>, E>,
            impl FnOnce(&Tensor<Reduced<S, I>, E>, [bool; 1]) -> Option<Tensor<S, E>>
            + use<Self, S, E, I>,
        )
        where
            S: ReduceAxis<I>,
        {
            let x = self.tensor();
            let orig = x.shape();
            (
                x.detach().squeeze::<I>(),
                move |dy: &Tensor<_, E>, [need]: [bool; 1]| {
                    wants::<E>(need).then(|| ok(dy.reshape_unchecked(orig)))
                },
            )
        }

        /// [`Tensor::unsqueeze`] with its backward: the gradient reshaped back.
        #[allow(clippy::type_complexity)]
        fn unsqueeze<const I: usize>(
            &self,
        ) -> (
            Tensor<<S as InsertAxis<I, Const<1>>>::Output, E>,
            impl FnOnce(
                &Tensor<<S as InsertAxis<I, Const<1>>>::Output, E>,
                [bool; 1],
            ) -> Option<Tensor<S, E>>
            + use<Self, S, E, I>,
        )
        where
            S: InsertAxis<I, Const<1>>,
        {
            let x = self.tensor();
            let orig = x.shape();
            (
                x.detach().unsqueeze::<I>(),
                move |dy: &Tensor<_, E>, [need]: [bool; 1]| {
                    wants::<E>(need).then(|| ok(dy.reshape_unchecked(orig)))
                },
            )
        }

        /// [`Tensor::broadcast_to`] with its backward: the gradient summed over the repeated dims.
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let col: Tensor<Rank2<2, 1>> = Tensor::from_array([[1.0], [2.0]], Device::Cpu);
        /// let (m, backward) = StaticOps::broadcast_to(&col, (Const::<2>, Const::<3>));
        /// assert_eq!(backward(&m, [true]).unwrap().to_vec(), vec![3.0, 6.0]);
        /// ```
        ///
        /// # Panics
        /// As [`Tensor::broadcast_to`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn broadcast_to<T: Shape>(
            &self,
            shape: T,
        ) -> (
            Tensor<T, E>,
            impl FnOnce(&Tensor<T, E>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E, T>,
        ) {
            let x = self.tensor();
            let orig = x.shape();
            (
                x.detach().broadcast_to(shape),
                move |dy: &Tensor<T, E>, [need]: [bool; 1]| {
                    wants::<E>(need).then(|| ok(sum_to(dy, orig)))
                },
            )
        }

        /// [`Tensor::expand`] (PyTorch's name for [`StaticOps::broadcast_to`]) with its backward.
        ///
        /// # Panics
        /// As [`Tensor::broadcast_to`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn expand<T: Shape>(
            &self,
            shape: T,
        ) -> (
            Tensor<T, E>,
            impl FnOnce(&Tensor<T, E>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E, T>,
        ) {
            self.broadcast_to(shape)
        }

        /// [`Tensor::narrow`] with its backward: the gradient placed into zeros at `start..`.
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let x: Tensor<Rank1<4>> = Tensor::from_array([1.0, 2.0, 3.0, 4.0], Device::Cpu);
        /// let (y, backward) = StaticOps::narrow::<0, Const<2>>(&x, 1, Const);
        /// assert_eq!(y.to_vec(), vec![2.0, 3.0]);
        /// assert_eq!(backward(&y, [true]).unwrap().to_vec(), vec![0.0, 2.0, 3.0, 0.0]);
        /// ```
        ///
        /// # Panics
        /// As [`Tensor::narrow`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn narrow<const I: usize, D: Dim>(
            &self,
            start: usize,
            len: D,
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
            let orig = x.shape();
            let y = x.detach().narrow::<I, D>(start, len);
            (y, move |dy: &Tensor<_, E>, [need]: [bool; 1]| {
                wants::<E>(need).then(|| ok(narrow_back::<I, S, D, E>(dy, orig, start)))
            })
        }

        /// [`Tensor::slice`] (a run-time sized [`StaticOps::narrow`]) with its backward.
        ///
        /// # Panics
        /// As [`Tensor::slice`] does.
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn slice<const I: usize>(
            &self,
            range: std::ops::Range<usize>,
        ) -> (
            Tensor<Replaced<S, I, usize>, E>,
            impl FnOnce(&Tensor<Replaced<S, I, usize>, E>, [bool; 1]) -> Option<Tensor<S, E>>
            + use<Self, S, E, I>,
        )
        where
            S: ReduceAxis<I>,
            <S as ReduceAxis<I>>::Reduced: InsertAxis<I, usize>,
        {
            let len = range.end.saturating_sub(range.start);
            self.narrow::<I, usize>(range.start, len)
        }

        /// [`Tensor::contiguous`] with its backward (the gradient passes unchanged).
        #[allow(clippy::type_complexity)]
        fn contiguous(
            &self,
        ) -> (
            Tensor<S, E>,
            impl FnOnce(&Tensor<S, E>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E>,
        ) {
            let y = self.tensor().detach().contiguous();
            (y, move |dy: &Tensor<S, E>, [need]: [bool; 1]| {
                wants::<E>(need).then(|| dy.clone())
            })
        }

        /// [`Tensor::cast`] with its backward: the gradient cast back, when both types are floats
        /// (a cast to or from an integer passes no gradient, as on the tape).
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let x: Tensor<Rank1<2>> = Tensor::from_array([1.5, 2.0], Device::Cpu);
        /// let (y, backward) = StaticOps::cast::<f64>(&x);
        /// assert_eq!(y.to_vec(), vec![1.5, 2.0]);
        /// assert_eq!(backward(&y, [true]).unwrap().to_vec(), vec![1.5f32, 2.0]);
        /// ```
        #[allow(clippy::type_complexity)]
        fn cast<U: Element>(
            &self,
        ) -> (
            Tensor<S, U>,
            impl FnOnce(&Tensor<S, U>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E, U>,
        ) {
            let y = self.tensor().detach().cast::<U>();
            (y, move |dy: &Tensor<S, U>, [need]: [bool; 1]| {
                (wants::<E>(need) && U::DTYPE.is_float()).then(|| dy.cast::<E>())
            })
        }
    };
}

pub(super) use view_methods;
